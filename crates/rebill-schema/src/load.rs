//! Reading `schema/` and checking it. Every error names the file and the field (or enum value)
//! it concerns.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use crate::ir::*;

/// A broken schema: `<file>: <where>: <what>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema/{file}: {place}{message}")]
pub struct SchemaError {
    pub file: String,
    /// `field `x`: `, `enum `e` value `v`: `, or empty.
    pub place: String,
    pub message: String,
}

fn err(file: &str, place: impl Into<String>, message: impl Into<String>) -> SchemaError {
    SchemaError { file: file.to_owned(), place: place.into(), message: message.into() }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVersions {
    versions: Vec<String>,
    default: String,
    #[serde(default)]
    features: BTreeMap<String, RawFeature>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFeature {
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpoints {
    endpoints: Vec<RawEndpoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpoint {
    name: String,
    method: String,
    path: String,
    since: Option<String>,
    below_since: Option<String>,
    feature: Option<String>,
    request: Option<String>,
    response: Option<String>,
    list: Option<String>,
    list_root: Option<String>,
    #[serde(default)]
    responses: Vec<RawLater>,
    status: u16,
    #[serde(default)]
    filters: Vec<String>,
    #[serde(default)]
    query: Vec<String>,
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLater {
    since: String,
    response: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    resource: RawResource,
    #[serde(default)]
    fields: Vec<RawField>,
    #[serde(default)]
    enums: Vec<RawEnum>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResource {
    name: String,
    root: Option<String>,
    rust: Option<String>,
    plural: Option<String>,
    href: Option<String>,
    #[serde(default)]
    rules: bool,
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawField {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    of: Option<String>,
    item: Option<String>,
    direction: Option<String>,
    since: Option<String>,
    until: Option<String>,
    element: Option<String>,
    #[serde(default)]
    renames: Vec<RawRename>,
    feature: Option<String>,
    #[serde(default)]
    required: bool,
    attribute: Option<String>,
    #[serde(default)]
    typed: bool,
    #[serde(default)]
    inline: bool,
    #[serde(default)]
    omit_empty: bool,
    #[serde(default)]
    href_only: bool,
    #[serde(default)]
    required_on: Vec<String>,
    format: Option<String>,
    validate_since: Option<String>,
    max_length: Option<usize>,
    #[serde(default)]
    fixed_attributes: BTreeMap<String, String>,
    anchor: Option<String>,
    method: Option<String>,
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRename {
    since: Option<String>,
    until: Option<String>,
    element: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnum {
    name: String,
    rust: Option<String>,
    doc: String,
    values: Vec<RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawValue {
    name: String,
    since: Option<String>,
    until: Option<String>,
    feature: Option<String>,
    fallback: Option<String>,
    value: Option<String>,
    #[serde(default)]
    renames: Vec<RawValueRename>,
    #[serde(default)]
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawValueRename {
    since: Option<String>,
    until: Option<String>,
    value: String,
}

/// Loads `dir` (the `schema/` directory): `versions.toml` and every other `*.toml` file.
pub fn load_dir(dir: &Path) -> Result<Schema, SchemaError> {
    let entries = std::fs::read_dir(dir).map_err(|e| err("", "", format!("cannot read {}: {e}", dir.display())))?;
    let mut sources = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| err("", "", e.to_string()))?.path();
        if path.extension().is_some_and(|x| x == "toml") {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let text = std::fs::read_to_string(&path).map_err(|e| err(&name, "", format!("cannot read: {e}")))?;
            sources.push((name, text));
        }
    }
    load_sources(&sources)
}

/// Loads a schema from (file name, contents) pairs; one of them must be `versions.toml`.
pub fn load_sources(sources: &[(String, String)]) -> Result<Schema, SchemaError> {
    let mut sorted: Vec<&(String, String)> = sources.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let (_, versions_text) =
        sorted.iter().find(|(n, _)| n == "versions.toml").ok_or_else(|| err("versions.toml", "", "missing"))?;
    let raw_versions: RawVersions =
        toml::from_str(versions_text).map_err(|e| err("versions.toml", "", toml_message(&e)))?;
    let ctx = Versions::check(&raw_versions)?;

    let mut files = Vec::new();
    for (name, text) in sorted.iter().filter(|(n, _)| n != "versions.toml" && n != "endpoints.toml") {
        let raw: RawFile = toml::from_str(text).map_err(|e| err(name, "", toml_message(&e)))?;
        files.push((name.clone(), raw));
    }

    let mut enums = Vec::new();
    for (file, raw) in &files {
        for e in &raw.enums {
            enums.push(ctx.enum_def(file, e)?);
        }
    }
    let mut seen = BTreeMap::new();
    for e in &enums {
        if let Some(first) = seen.insert(e.name.clone(), e.file.clone()) {
            return Err(err(&e.file, format!("enum `{}`: ", e.name), format!("already defined in schema/{first}")));
        }
    }
    let resource_roots: BTreeMap<String, String> = files
        .iter()
        .map(|(_, raw)| {
            (raw.resource.name.clone(), raw.resource.root.clone().unwrap_or_else(|| raw.resource.name.clone()))
        })
        .collect();

    let mut resources = Vec::new();
    let mut rust_names = BTreeMap::new();
    for e in &enums {
        rust_names.insert(e.rust_name.clone(), e.file.clone());
    }
    for (file, raw) in &files {
        let resource = ctx.resource(file, raw, &enums, &resource_roots)?;
        if let Some(other) = rust_names.insert(resource.rust_name.clone(), file.clone()) {
            return Err(err(
                file,
                "",
                format!("Rust type name `{}` is already used in schema/{other}", resource.rust_name),
            ));
        }
        resources.push(resource);
    }
    resources.sort_by(|a, b| a.name.cmp(&b.name));
    enums.sort_by(|a, b| a.name.cmp(&b.name));
    let endpoints = match sorted.iter().find(|(n, _)| n == "endpoints.toml") {
        Some((_, text)) => {
            let raw: RawEndpoints = toml::from_str(text).map_err(|e| err("endpoints.toml", "", toml_message(&e)))?;
            ctx.endpoints(&raw, &resources)?
        }
        None => Vec::new(),
    };
    Ok(Schema {
        versions: ctx.versions,
        default_version: ctx.default,
        features: ctx.features,
        resources,
        enums,
        endpoints,
    })
}

fn toml_message(e: &toml::de::Error) -> String {
    e.to_string().lines().map(str::trim_end).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

struct Versions {
    versions: Vec<Version>,
    default: Version,
    features: Vec<Feature>,
}

fn is_snake(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.ends_with('_')
        && !name.contains("__")
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn",
    "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self",
    "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become",
    "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try",
];

/// `invoice_state` → `InvoiceState`.
pub fn camel_case(snake: &str) -> String {
    snake
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

fn is_xml_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl Versions {
    fn check(raw: &RawVersions) -> Result<Self, SchemaError> {
        let file = "versions.toml";
        let mut versions = Vec::new();
        for text in &raw.versions {
            let v = parse_version(text)
                .ok_or_else(|| err(file, "versions: ", format!("`{text}` is not a version like \"2.10\"")))?;
            if versions.last().is_some_and(|last| *last >= v) {
                return Err(err(file, "versions: ", format!("`{text}` is out of order (oldest first, no repeats)")));
            }
            versions.push(v);
        }
        if versions.is_empty() {
            return Err(err(file, "versions: ", "no versions"));
        }
        let default = parse_version(&raw.default)
            .filter(|v| versions.contains(v))
            .ok_or_else(|| err(file, "default: ", format!("`{}` is not one of the versions", raw.default)))?;
        let mut features = Vec::new();
        for (name, f) in &raw.features {
            if !is_snake(name) {
                return Err(err(file, format!("feature `{name}`: "), "names are snake_case"));
            }
            features.push(Feature { name: name.clone(), doc: f.doc.clone() });
        }
        Ok(Self { versions, default, features })
    }

    fn version(&self, file: &str, place: &str, text: &Option<String>) -> Result<Option<Version>, SchemaError> {
        let Some(text) = text else { return Ok(None) };
        let v = parse_version(text).filter(|v| self.versions.contains(v)).ok_or_else(|| {
            err(file, place, format!("unknown version `{text}` (versions.toml lists {})", self.list()))
        })?;
        Ok(Some(v))
    }

    fn range(
        &self,
        file: &str,
        place: &str,
        since: &Option<String>,
        until: &Option<String>,
    ) -> Result<Range, SchemaError> {
        let range = Range { since: self.version(file, place, since)?, until: self.version(file, place, until)? };
        if let (Some(s), Some(u)) = (range.since, range.until)
            && s >= u
        {
            return Err(err(file, place, format!("empty version range: since {s} is not before until {u}")));
        }
        Ok(range)
    }

    fn feature(&self, file: &str, place: &str, feature: &Option<String>) -> Result<Option<String>, SchemaError> {
        match feature {
            Some(f) if !self.features.iter().any(|k| &k.name == f) => Err(err(
                file,
                place,
                format!(
                    "unknown feature `{f}` (versions.toml declares {})",
                    self.features.iter().map(|f| format!("`{}`", f.name)).collect::<Vec<_>>().join(", ")
                ),
            )),
            other => Ok(other.clone()),
        }
    }

    fn list(&self) -> String {
        self.versions.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }

    /// Every combination of features (the schema has few).
    fn feature_sets(&self) -> Vec<BTreeSet<&str>> {
        let mut sets = vec![BTreeSet::new()];
        for f in &self.features {
            let with: Vec<_> = sets
                .iter()
                .map(|s| {
                    let mut s = s.clone();
                    s.insert(f.name.as_str());
                    s
                })
                .collect();
            sets.extend(with);
        }
        sets
    }

    fn enum_def(&self, file: &str, raw: &RawEnum) -> Result<EnumDef, SchemaError> {
        let place = format!("enum `{}`: ", raw.name);
        if !is_snake(&raw.name) {
            return Err(err(file, &place, "enum names are snake_case"));
        }
        let mut values = Vec::new();
        for v in &raw.values {
            let vplace = format!("enum `{}` value `{}`: ", raw.name, v.name);
            if !is_snake(&v.name) {
                return Err(err(file, &vplace, "value names are snake_case"));
            }
            if values.iter().any(|x: &EnumValue| x.name == v.name) {
                return Err(err(file, &vplace, "defined twice"));
            }
            let range = self.range(file, &vplace, &v.since, &v.until)?;
            let feature = self.feature(file, &vplace, &v.feature)?;
            let bounded = range != Range::default() || feature.is_some();
            if bounded && v.fallback.is_none() {
                return Err(err(file, &vplace, "a value with since, until or feature needs a fallback"));
            }
            if !bounded && v.fallback.is_some() {
                return Err(err(file, &vplace, "fallback without since, until or feature is never used"));
            }
            if v.value.is_some() && !v.renames.is_empty() {
                return Err(err(file, &vplace, "give either value or renames, not both"));
            }
            let mut renames = Vec::new();
            for r in &v.renames {
                renames.push(ValueRename {
                    range: self.range(file, &vplace, &r.since, &r.until)?,
                    value: r.value.clone(),
                });
            }
            self.check_cover(file, &vplace, range, &renames.iter().map(|r| r.range).collect::<Vec<_>>())?;
            values.push(EnumValue {
                name: v.name.clone(),
                rust_name: camel_case(&v.name),
                range,
                feature,
                fallback: v.fallback.clone(),
                value: v.value.clone().unwrap_or_else(|| v.name.clone()),
                renames,
                doc: v.doc.clone(),
            });
        }
        if values.is_empty() {
            return Err(err(file, &place, "no values"));
        }
        for v in &values {
            if let Some(fb) = &v.fallback
                && (!values.iter().any(|x| &x.name == fb) || fb == &v.name)
            {
                return Err(err(
                    file,
                    format!("enum `{}` value `{}`: ", raw.name, v.name),
                    format!("fallback `{fb}` is not another value of the enum"),
                ));
            }
        }
        let def = EnumDef {
            name: raw.name.clone(),
            rust_name: raw.rust.clone().unwrap_or_else(|| camel_case(&raw.name)),
            doc: raw.doc.clone(),
            values,
            file: file.to_owned(),
        };
        // At every version and feature set: fallbacks end in an existing value, and no two
        // existing values share a spelling.
        for features in self.feature_sets() {
            for &version in &self.versions {
                let exists = |v: &EnumValue| {
                    v.range.contains(version) && v.feature.as_deref().is_none_or(|f| features.contains(f))
                };
                let mut spellings: BTreeMap<&str, &str> = BTreeMap::new();
                for v in def.values.iter().filter(|v| exists(v)) {
                    let spelling = v.spelling_at(version).unwrap_or_default();
                    if let Some(other) = spellings.insert(spelling, &v.name) {
                        return Err(err(
                            file,
                            &place,
                            format!("values `{other}` and `{}` are both spelled `{spelling}` at {version}", v.name),
                        ));
                    }
                }
                for v in &def.values {
                    let mut current = v;
                    let mut steps = 0;
                    while !exists(current) {
                        steps += 1;
                        let next = current.fallback.as_ref().and_then(|fb| def.values.iter().find(|x| &x.name == fb));
                        match next {
                            Some(n) if steps <= def.values.len() => current = n,
                            _ => {
                                return Err(err(
                                    file,
                                    format!("enum `{}` value `{}`: ", def.name, v.name),
                                    format!("fallback chain finds no existing value at {version}"),
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(def)
    }

    /// Checks that rename ranges do not overlap and cover every version of `own`.
    fn check_cover(&self, file: &str, place: &str, own: Range, renames: &[Range]) -> Result<(), SchemaError> {
        if renames.is_empty() {
            return Ok(());
        }
        for &v in self.versions.iter().filter(|v| own.contains(**v)) {
            match renames.iter().filter(|r| r.contains(v)).count() {
                0 => {
                    return Err(err(file, place, format!("renames leave version {v} without a name")));
                }
                1 => {}
                _ => return Err(err(file, place, format!("rename ranges overlap at {v}"))),
            }
        }
        Ok(())
    }

    fn resource(
        &self,
        file: &str,
        raw: &RawFile,
        enums: &[EnumDef],
        roots: &BTreeMap<String, String>,
    ) -> Result<Resource, SchemaError> {
        let r = &raw.resource;
        if !is_snake(&r.name) {
            return Err(err(file, "resource: ", format!("name `{}` is not snake_case", r.name)));
        }
        if file != format!("{}.toml", r.name) {
            return Err(err(file, "resource: ", format!("name `{}` does not match the file name", r.name)));
        }
        let root = r.root.clone().unwrap_or_else(|| r.name.clone());
        if !is_xml_name(&root) || r.plural.as_deref().is_some_and(|p| !is_xml_name(p)) {
            return Err(err(file, "resource: ", "root and plural must be XML element names"));
        }
        let mut fields = Vec::new();
        for f in &raw.fields {
            fields.push(self.field(file, f, enums, roots)?);
            let field = fields.last().expect("just pushed");
            if fields[..fields.len() - 1].iter().any(|x| x.name == field.name) {
                return Err(err(file, format!("field `{}`: ", field.name), "defined twice"));
            }
        }
        if let Some(text) = fields.iter().find(|f| f.ty == FieldType::Text) {
            if fields.iter().filter(|f| f.ty == FieldType::Text).count() > 1 {
                return Err(err(file, format!("field `{}`: ", text.name), "a resource has at most one text field"));
            }
            if let Some(child) = fields.iter().find(|f| f.ty != FieldType::Text && f.attribute.is_none()) {
                return Err(err(
                    file,
                    format!("field `{}`: ", child.name),
                    format!("resource has a text field (`{}`), so every other field must be an attribute", text.name),
                ));
            }
        }
        let mut href_params = Vec::new();
        if let Some(href) = &r.href {
            let mut rest = href.as_str();
            if !href.starts_with("/v2/") {
                return Err(err(file, "resource: ", format!("href `{href}` must start with /v2/")));
            }
            let whole_segments = href.split('/').all(|segment| {
                let braces = segment.matches(['{', '}']).count();
                braces == 0 || (braces == 2 && segment.starts_with('{') && segment.ends_with('}'))
            });
            if !whole_segments {
                return Err(err(
                    file,
                    "resource: ",
                    format!("href `{href}`: each `{{name}}` must be a whole path segment"),
                ));
            }
            while let Some(open) = rest.find('{') {
                let close = rest[open..]
                    .find('}')
                    .map(|c| c + open)
                    .ok_or_else(|| err(file, "resource: ", format!("href `{href}` has an unclosed `{{`")))?;
                let name = &rest[open + 1..close];
                let ok = fields
                    .iter()
                    .any(|f| f.name == name && matches!(f.ty, FieldType::Scalar(Scalar::String | Scalar::Integer)));
                if !ok {
                    return Err(err(
                        file,
                        "resource: ",
                        format!("href `{href}` names `{name}`, which is not a string or integer field"),
                    ));
                }
                href_params.push(name.to_owned());
                rest = &rest[close + 1..];
            }
        }
        if let Some(f) = fields.iter().find(|f| f.href_only && !href_params.contains(&f.name)) {
            return Err(err(
                file,
                format!("field `{}`: ", f.name),
                "an href_only field must be named in the resource's href",
            ));
        }
        // No two fields may claim one element (or attribute, or anchor) in one document.
        for &version in &self.versions {
            for direction in [Direction::Request, Direction::Response] {
                let mut claimed: BTreeMap<String, &str> = BTreeMap::new();
                for f in fields.iter().filter(|f| f.direction.overlaps(direction)) {
                    if let Some(element) = f.element_at(version)
                        && let Some(other) = claimed.insert(element.clone(), &f.name)
                    {
                        return Err(err(
                            file,
                            format!("field `{}`: ", f.name),
                            format!(
                                "element `{element}` is also claimed by field `{other}` at {version} in {}s",
                                direction.as_str()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(Resource {
            name: r.name.clone(),
            root,
            rust_name: r.rust.clone().unwrap_or_else(|| camel_case(&r.name)),
            plural: r.plural.clone(),
            href: r.href.clone(),
            doc: r.doc.clone(),
            fields,
            rules: r.rules,
            file: file.to_owned(),
        })
    }

    fn field(
        &self,
        file: &str,
        f: &RawField,
        enums: &[EnumDef],
        roots: &BTreeMap<String, String>,
    ) -> Result<Field, SchemaError> {
        let place = format!("field `{}`: ", f.name);
        if !is_snake(&f.name) || RUST_KEYWORDS.contains(&f.name.as_str()) {
            return Err(err(
                file,
                &place,
                "field names are snake_case and not Rust keywords (use `element` for the XML name)",
            ));
        }
        let direction = match f.direction.as_deref().unwrap_or("both") {
            "request" => Direction::Request,
            "response" => Direction::Response,
            "both" => Direction::Both,
            other => {
                return Err(err(file, &place, format!("unknown direction `{other}` (request, response or both)")));
            }
        };
        let need_of =
            |what: &str| f.of.clone().ok_or_else(|| err(file, &place, format!("type `{}` needs `of` ({what})", f.ty)));
        let ty = match f.ty.as_str() {
            "money" => FieldType::Money,
            "text" => FieldType::Text,
            "link" => FieldType::Link,
            "enum" => {
                let of = need_of("an enum name")?;
                if !enums.iter().any(|e| e.name == of) {
                    return Err(err(file, &place, format!("unknown enum `{of}`")));
                }
                FieldType::Enum(of)
            }
            "resource" => {
                let of = need_of("a resource name")?;
                if !roots.contains_key(&of) {
                    return Err(err(file, &place, format!("unknown resource `{of}`")));
                }
                FieldType::Resource(of)
            }
            "list" => {
                let of = need_of("a resource name")?;
                let root = roots.get(&of).ok_or_else(|| err(file, &place, format!("unknown resource `{of}`")))?;
                FieldType::List { item: f.item.clone().unwrap_or_else(|| root.clone()), of, inline: f.inline }
            }
            "values" => {
                let of = need_of("a scalar type")?;
                let scalar = Scalar::parse(&of)
                    .ok_or_else(|| err(file, &place, format!("`of = \"{of}\"` is not a scalar type")))?;
                let item = f
                    .item
                    .clone()
                    .ok_or_else(|| err(file, &place, "type `values` needs `item` (the element of each value)"))?;
                FieldType::Values { of: scalar, item }
            }
            "anchor" => {
                let name = f
                    .anchor
                    .clone()
                    .ok_or_else(|| err(file, &place, "type `anchor` needs `anchor` (the anchor's name)"))?;
                let method = f.method.clone().unwrap_or_default();
                if !matches!(method.as_str(), "get" | "post" | "put" | "delete") {
                    return Err(err(file, &place, "type `anchor` needs `method` = get, post, put or delete"));
                }
                if direction != Direction::Response {
                    return Err(err(file, &place, "anchors appear only in responses (direction = \"response\")"));
                }
                FieldType::Anchor { name, method }
            }
            other => match Scalar::parse(other) {
                Some(s) => FieldType::Scalar(s),
                None => {
                    return Err(err(
                        file,
                        &place,
                        format!(
                            "unknown type `{other}` (string, integer, boolean, datetime, date, float, cents, money, enum, resource, list, values, link, anchor, text)"
                        ),
                    ));
                }
            },
        };
        if f.of.is_some()
            && !matches!(
                ty,
                FieldType::Enum(_) | FieldType::Resource(_) | FieldType::List { .. } | FieldType::Values { .. }
            )
        {
            return Err(err(file, &place, format!("`of` does not apply to type `{}`", f.ty)));
        }
        if f.item.is_some() && !matches!(ty, FieldType::List { .. } | FieldType::Values { .. }) {
            return Err(err(file, &place, format!("`item` does not apply to type `{}`", f.ty)));
        }
        if (f.anchor.is_some() || f.method.is_some()) && !matches!(ty, FieldType::Anchor { .. }) {
            return Err(err(file, &place, "`anchor` and `method` apply only to type `anchor`"));
        }
        if f.inline && !matches!(ty, FieldType::List { .. }) {
            return Err(err(file, &place, "`inline` applies only to type `list`"));
        }
        if matches!(ty, FieldType::Text) && (f.element.is_some() || !f.renames.is_empty() || f.attribute.is_some()) {
            return Err(err(file, &place, "a text field is the element's content: no element name or attribute"));
        }
        if f.typed && !matches!(ty, FieldType::Resource(_)) {
            return Err(err(file, &place, "`typed` applies only to type `resource`"));
        }
        if f.attribute.is_some() && !matches!(ty, FieldType::Scalar(Scalar::String) | FieldType::Enum(_)) {
            return Err(err(file, &place, "only string and enum fields can be attributes"));
        }
        if f.attribute.is_some() && (f.element.is_some() || !f.renames.is_empty()) {
            return Err(err(file, &place, "an attribute field has no element name"));
        }
        let range = self.range(file, &place, &f.since, &f.until)?;
        let feature = self.feature(file, &place, &f.feature)?;
        if f.element.is_some() && !f.renames.is_empty() {
            return Err(err(file, &place, "give either element or renames, not both"));
        }
        let mut renames = Vec::new();
        for r in &f.renames {
            if !is_xml_name(&r.element) {
                return Err(err(file, &place, format!("`{}` is not an XML element name", r.element)));
            }
            renames.push(Rename { range: self.range(file, &place, &r.since, &r.until)?, element: r.element.clone() });
        }
        self.check_cover(file, &place, range, &renames.iter().map(|r| r.range).collect::<Vec<_>>())?;
        let mut required_on = Vec::new();
        for op in &f.required_on {
            required_on.push(match op.as_str() {
                "create" => Operation::Create,
                "update" => Operation::Update,
                other => {
                    return Err(err(
                        file,
                        &place,
                        format!("unknown operation `{other}` in required_on (create or update)"),
                    ));
                }
            });
        }
        if !required_on.is_empty() && direction == Direction::Response {
            return Err(err(file, &place, "required_on applies to request fields"));
        }
        let format = match f.format.as_deref() {
            None => None,
            Some("email") => Some(Format::Email),
            Some("country") => Some(Format::Country),
            Some("code") => Some(Format::Code),
            Some(other) => {
                return Err(err(file, &place, format!("unknown format `{other}` (email, country or code)")));
            }
        };
        let string_values = matches!(ty, FieldType::Values { of: Scalar::String, .. });
        if format.is_some()
            && !matches!(ty, FieldType::Scalar(Scalar::String))
            && !(format == Some(Format::Code) && string_values)
        {
            return Err(err(file, &place, "formats apply to string fields (and `code` to string values)"));
        }
        let textual = matches!(ty, FieldType::Scalar(Scalar::String) | FieldType::Text) || string_values;
        let max_length = match f.max_length {
            Some(_) if !textual => {
                return Err(err(file, &place, "max_length applies to string, text and string values fields"));
            }
            Some(_) if direction == Direction::Response => {
                return Err(err(file, &place, "max_length applies to fields a request can carry"));
            }
            Some(0) => return Err(err(file, &place, "max_length must be at least 1")),
            Some(n) if format == Some(Format::Code) && n > CODE_MAX_LENGTH => {
                return Err(err(file, &place, format!("a code has at most {CODE_MAX_LENGTH} characters")));
            }
            Some(n) => Some(n),
            None if !textual || direction == Direction::Response => None,
            None if format == Some(Format::Code) => Some(CODE_MAX_LENGTH),
            None => Some(DEFAULT_MAX_LENGTH),
        };
        let validate_since = self.version(file, &place, &f.validate_since)?;
        if validate_since.is_some() && format.is_none() {
            return Err(err(file, &place, "validate_since needs a format"));
        }
        if !f.fixed_attributes.is_empty() && !matches!(ty, FieldType::Scalar(Scalar::String)) {
            return Err(err(file, &place, "fixed_attributes apply to string fields"));
        }
        if !f.fixed_attributes.is_empty() && f.attribute.is_some() {
            return Err(err(file, &place, "an attribute field has no element to put fixed_attributes on"));
        }
        for (name, value) in &f.fixed_attributes {
            if !is_xml_name(name) || matches!(name.as_str(), "type" | "nil") {
                return Err(err(file, &place, format!("`{name}` cannot be a fixed attribute")));
            }
            if value.chars().any(|c| c.is_control()) {
                return Err(err(file, &place, format!("fixed attribute `{name}` has a control character")));
            }
        }
        if f.href_only && (!matches!(ty, FieldType::Scalar(Scalar::String)) || direction != Direction::Response) {
            return Err(err(file, &place, "href_only applies to response-only string fields"));
        }
        if f.href_only
            && (f.element.is_some()
                || !f.renames.is_empty()
                || f.attribute.is_some()
                || f.omit_empty
                || f.required
                || !f.fixed_attributes.is_empty())
        {
            return Err(err(
                file,
                &place,
                "an href_only field lives in the root href: no element, renames, attribute, omit_empty, required or fixed_attributes",
            ));
        }
        let fixed_attributes = f.fixed_attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let element = f.element.clone().unwrap_or_else(|| f.name.clone());
        if !is_xml_name(&element) {
            return Err(err(file, &place, format!("`{element}` is not an XML element name")));
        }
        Ok(Field {
            name: f.name.clone(),
            ty,
            direction,
            range,
            element,
            renames,
            feature,
            required: f.required,
            attribute: f.attribute.clone(),
            typed: f.typed,
            omit_empty: f.omit_empty,
            href_only: f.href_only,
            required_on,
            format,
            validate_since,
            max_length,
            fixed_attributes,
            doc: f.doc.clone(),
        })
    }
}

impl Versions {
    fn endpoints(&self, raw: &RawEndpoints, resources: &[Resource]) -> Result<Vec<Endpoint>, SchemaError> {
        let file = "endpoints.toml";
        let mut out: Vec<Endpoint> = Vec::new();
        for e in &raw.endpoints {
            let place = format!("endpoint `{}`: ", e.name);
            if !is_snake(&e.name) {
                return Err(err(file, &place, "endpoint names are snake_case"));
            }
            if out.iter().any(|o| o.name == e.name) {
                return Err(err(file, &place, "defined twice"));
            }
            let method = Method::parse(&e.method).ok_or_else(|| {
                err(file, &place, format!("unknown method `{}` (GET, POST, PUT or DELETE)", e.method))
            })?;
            if !e.path.starts_with("/v2/") || e.path.ends_with('/') || e.path.contains("//") {
                return Err(err(
                    file,
                    &place,
                    format!("path `{}` must start with /v2/ and have no empty segment", e.path),
                ));
            }
            for segment in e.path.split('/').skip(1) {
                let param = segment.strip_prefix('{').map(|s| s.strip_suffix('}'));
                let ok = match param {
                    Some(Some(name)) => is_snake(name),
                    Some(None) => false,
                    None => !segment.contains(['{', '}', ':', '?']) && !segment.is_empty(),
                };
                if !ok {
                    return Err(err(
                        file,
                        &place,
                        format!("path segment `{segment}` is neither a name nor a `{{param}}`"),
                    ));
                }
            }
            let range = self.range(file, &place, &e.since, &None)?;
            let below_since = match (e.below_since.as_deref(), range.since) {
                (None | Some("not_found"), _) => BelowSince::NotFound,
                (Some("unavailable"), Some(_)) => BelowSince::Unavailable,
                (Some("unavailable"), None) => {
                    return Err(err(file, &place, "below_since needs a since version"));
                }
                (Some(other), _) => {
                    return Err(err(file, &place, format!("unknown below_since `{other}` (not_found or unavailable)")));
                }
            };
            let feature = self.feature(file, &place, &e.feature)?;
            let resource = |name: &String| -> Result<String, SchemaError> {
                if resources.iter().any(|r| &r.name == name) {
                    Ok(name.clone())
                } else {
                    Err(err(file, &place, format!("unknown resource `{name}`")))
                }
            };
            let request = e.request.as_ref().map(resource).transpose()?;
            let response = match (&e.response, &e.list) {
                (Some(_), Some(_)) => return Err(err(file, &place, "give either response or list, not both")),
                (Some(r), None) => ResponseBody::Resource(resource(r)?),
                (None, Some(l)) => {
                    let name = resource(l)?;
                    if resources.iter().any(|r| r.name == name && r.plural.is_none()) {
                        return Err(err(
                            file,
                            &place,
                            format!("resource `{name}` has no plural name, so it cannot be listed"),
                        ));
                    }
                    if method != Method::Get {
                        return Err(err(file, &place, "list endpoints are GET"));
                    }
                    ResponseBody::List(name)
                }
                (None, None) => ResponseBody::Empty,
            };
            let mut later = Vec::new();
            for l in &e.responses {
                let version = self.version(file, &place, &Some(l.since.clone()))?.unwrap_or(self.default);
                if !matches!(response, ResponseBody::Resource(_)) || later.last().is_some_and(|(v, _)| *v >= version) {
                    return Err(err(file, &place, "`responses` needs a `response` and versions in increasing order"));
                }
                later.push((version, resource(&l.response)?));
            }
            match (e.status, &response) {
                (204 | 202 | 201, ResponseBody::Empty) => {}
                (200 | 201, ResponseBody::Resource(_) | ResponseBody::List(_)) => {}
                // Accepted with the resource as it is now (a transaction given back).
                (202, ResponseBody::Resource(_)) => {}
                (status, _) => {
                    return Err(err(
                        file,
                        &place,
                        format!(
                            "status {status} does not fit the response (200/201 with a body, 202 with a resource, 201/202/204 without)"
                        ),
                    ));
                }
            }
            if !e.filters.is_empty() && !matches!(response, ResponseBody::List(_)) {
                return Err(err(file, &place, "filters apply only to list endpoints"));
            }
            if let Some(root) = &e.list_root {
                if !matches!(response, ResponseBody::List(_)) {
                    return Err(err(file, &place, "list_root applies only to list endpoints"));
                }
                if !is_snake(root) {
                    return Err(err(file, &place, format!("list_root `{root}` is not a snake_case element name")));
                }
            }
            let endpoint = Endpoint {
                name: e.name.clone(),
                method,
                path: e.path.clone(),
                since: range.since,
                below_since,
                feature,
                request,
                response,
                later,
                status: e.status,
                list_root: e.list_root.clone(),
                filters: e.filters.clone(),
                query: e.query.clone(),
                doc: e.doc.clone(),
            };
            let shape =
                |p: &str| p.split('/').map(|s| if s.starts_with('{') { "{}" } else { s }).collect::<Vec<_>>().join("/");
            if let Some(other) =
                out.iter().find(|o| o.method == endpoint.method && shape(&o.path) == shape(&endpoint.path))
            {
                return Err(err(file, &place, format!("{} {} is also endpoint `{}`", e.method, e.path, other.name)));
            }
            out.push(endpoint);
        }
        Ok(out)
    }
}

fn parse_version(text: &str) -> Option<Version> {
    let (a, b) = text.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    Some(Version { major: a.parse().ok()?, minor: b.parse().ok()? })
}
