//! The typed schema: what the generator and the documentation work from.

use std::fmt;

/// An API version such as 2.10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u8,
    pub minor: u8,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// `[since, until)`; `None` bounds are open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Range {
    pub since: Option<Version>,
    pub until: Option<Version>,
}

impl Range {
    pub fn contains(&self, v: Version) -> bool {
        self.since.is_none_or(|s| v >= s) && self.until.is_none_or(|u| v < u)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.since, self.until) {
            (None, None) => write!(f, "all versions"),
            (Some(s), None) => write!(f, "{s} and later"),
            (None, Some(u)) => write!(f, "before {u}"),
            (Some(s), Some(u)) => write!(f, "{s} until {u}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// Supported versions, oldest first.
    pub versions: Vec<Version>,
    pub default_version: Version,
    pub features: Vec<Feature>,
    /// Sorted by name.
    pub resources: Vec<Resource>,
    /// Sorted by name.
    pub enums: Vec<EnumDef>,
    /// In the order of `endpoints.toml`.
    pub endpoints: Vec<Endpoint>,
}

impl Schema {
    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| r.name == name)
    }

    pub fn enum_def(&self, name: &str) -> Option<&EnumDef> {
        self.enums.iter().find(|e| e.name == name)
    }

    pub fn latest_version(&self) -> Version {
        self.versions.last().copied().unwrap_or(self.default_version)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    pub name: String,
    pub doc: String,
}

/// A request operation, for `required_on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// A checked value format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Email,
    /// ISO 3166-1 alpha-2 country code.
    Country,
    /// An identifier that is also a URL path segment (`account_code`, `plan_code`, …): at most
    /// [`CODE_MAX_LENGTH`] characters out of [`CODE_CHARACTERS`] and ASCII letters and digits,
    /// never containing `..`.
    Code,
}

/// The bound of a request string field that declares no `max_length`.
pub const DEFAULT_MAX_LENGTH: usize = 255;
/// The bound (and default) of a `format = "code"` field.
pub const CODE_MAX_LENGTH: usize = 50;
/// The characters besides ASCII letters and digits that a code may hold.
pub const CODE_CHARACTERS: &str = "-_.+@";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub name: String,
    /// XML element of the resource.
    pub root: String,
    pub rust_name: String,
    pub plural: Option<String>,
    pub href: Option<String>,
    pub doc: String,
    pub fields: Vec<Field>,
    /// Hand-written request rules exist for the resource (`rebill_models::rules::<name>`).
    pub rules: bool,
    /// The schema file, relative to the schema directory (`invoice.toml`).
    pub file: String,
}

impl Resource {
    /// Whether every field is request-only (a request document such as the invoice refund).
    pub fn is_request_only(&self) -> bool {
        self.fields.iter().all(|f| f.direction == Direction::Request)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Request,
    Response,
    Both,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Request => "request",
            Direction::Response => "response",
            Direction::Both => "both",
        }
    }

    pub fn overlaps(self, other: Direction) -> bool {
        self == Direction::Both || other == Direction::Both || self == other
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    String,
    Integer,
    Boolean,
    Datetime,
    Date,
    Float,
    Cents,
}

impl Scalar {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Scalar::String,
            "integer" => Scalar::Integer,
            "boolean" => Scalar::Boolean,
            "datetime" => Scalar::Datetime,
            "date" => Scalar::Date,
            "float" => Scalar::Float,
            "cents" => Scalar::Cents,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scalar::String => "string",
            Scalar::Integer => "integer",
            Scalar::Boolean => "boolean",
            Scalar::Datetime => "datetime",
            Scalar::Date => "date",
            Scalar::Float => "float",
            Scalar::Cents => "cents",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    Scalar(Scalar),
    Money,
    Enum(String),
    Resource(String),
    /// `inline`: the items are direct children of the resource, with no wrapper element.
    List {
        of: String,
        item: String,
        inline: bool,
    },
    /// The element's own text content (beside attribute fields).
    Text,
    Values {
        of: Scalar,
        item: String,
    },
    Link,
    Anchor {
        name: String,
        method: String,
    },
}

impl FieldType {
    /// The schema's name for the type (`cents`, `list`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            FieldType::Scalar(s) => s.as_str(),
            FieldType::Money => "money",
            FieldType::Enum(_) => "enum",
            FieldType::Resource(_) => "resource",
            FieldType::List { .. } => "list",
            FieldType::Text => "text",
            FieldType::Values { .. } => "values",
            FieldType::Link => "link",
            FieldType::Anchor { .. } => "anchor",
        }
    }
}

/// An element name and the versions it is used in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    pub range: Range,
    pub element: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: FieldType,
    pub direction: Direction,
    pub range: Range,
    /// Element name when there are no renames.
    pub element: String,
    pub renames: Vec<Rename>,
    pub feature: Option<String>,
    pub required: bool,
    pub attribute: Option<String>,
    pub typed: bool,
    /// In responses, a missing value is left out instead of being written `nil="nil"`.
    pub omit_empty: bool,
    /// The value has no element of its own: it is a parameter of the resource's `href` pattern,
    /// written into the root `href` of responses and parsed back from it (e.g. the account code
    /// in `<account_balance href="…/v2/accounts/abc/balance">`).
    pub href_only: bool,
    /// Request operations on which the field must be given.
    pub required_on: Vec<Operation>,
    /// Value format checked in requests.
    pub format: Option<Format>,
    /// First version at which `format` is checked.
    pub validate_since: Option<Version>,
    /// The most characters a request may send in this field (for each item of `values`):
    /// `Some` for every string-valued field a request can carry (declared, or the default),
    /// `None` for response-only and non-string fields.
    pub max_length: Option<usize>,
    /// Attributes with fixed values written on the field's element whenever it holds a value
    /// (`lang = "en-US"` on an error's `description`), in name order.
    pub fixed_attributes: Vec<(String, String)>,
    pub doc: String,
}

impl Field {
    /// Whether the field holds text (a string, the element's text, or a list of strings).
    pub fn is_textual(&self) -> bool {
        matches!(
            self.ty,
            FieldType::Scalar(Scalar::String) | FieldType::Text | FieldType::Values { of: Scalar::String, .. }
        )
    }
}

impl Field {
    /// The element (or `@attribute`, or `a[name=…]`, or `@href{name}` for an `href_only` field)
    /// the field uses at `v`, if it exists there.
    pub fn element_at(&self, v: Version) -> Option<String> {
        if !self.range.contains(v) {
            return None;
        }
        if self.href_only {
            return Some(format!("@href{{{}}}", self.name));
        }
        if let Some(attr) = &self.attribute {
            return Some(format!("@{attr}"));
        }
        match &self.ty {
            FieldType::Anchor { name, .. } => return Some(format!("a[name={name}]")),
            FieldType::Text => return Some("#text".to_owned()),
            FieldType::List { item, inline: true, .. } => return Some(item.clone()),
            _ => {}
        }
        if self.renames.is_empty() {
            return Some(self.element.clone());
        }
        self.renames.iter().find(|r| r.range.contains(v)).map(|r| r.element.clone())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumDef {
    pub name: String,
    pub rust_name: String,
    pub doc: String,
    pub values: Vec<EnumValue>,
    pub file: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumValue {
    pub name: String,
    pub rust_name: String,
    pub range: Range,
    pub feature: Option<String>,
    pub fallback: Option<String>,
    /// Spelling when there are no renames.
    pub value: String,
    pub renames: Vec<ValueRename>,
    pub doc: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueRename {
    pub range: Range,
    pub value: String,
}

impl EnumValue {
    /// The spelling at `v` when the value exists there.
    pub fn spelling_at(&self, v: Version) -> Option<&str> {
        if self.renames.is_empty() {
            return Some(&self.value);
        }
        self.renames.iter().find(|r| r.range.contains(v)).map(|r| r.value.as_str())
    }
}

/// HTTP methods of endpoints (HEAD on list endpoints is implied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// What an endpoint answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseBody {
    /// No body (204, or 202 with only a Location).
    Empty,
    /// One resource document.
    Resource(String),
    /// A list document of a resource, with the common list parameters.
    List(String),
}

/// The answer to a request for an endpoint at a version older than its `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BelowSince {
    /// 404 `not_found`, as for a path that does not exist (the default).
    #[default]
    NotFound,
    /// 400 `unavailable_in_api_version` (`below_since = "unavailable"`), where the original
    /// service is known to answer so (the account balance before 2.3).
    Unavailable,
}

/// One HTTP endpoint of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// snake_case identifier (`list_accounts`).
    pub name: String,
    pub method: Method,
    /// Path template with `{param}` segments (`/v2/accounts/{account_code}`).
    pub path: String,
    pub since: Option<Version>,
    /// What a version older than `since` is answered.
    pub below_since: BelowSince,
    pub feature: Option<String>,
    /// Resource of the request body, if any.
    pub request: Option<String>,
    pub response: ResponseBody,
    /// The response resource from a later version on (`invoice` → `invoice_collection` at 2.10).
    pub later: Vec<(Version, String)>,
    /// Success status.
    pub status: u16,
    /// The root element of a list endpoint's document when it is not the item resource's plural
    /// (`<unique_coupon_codes type="array">` of `<coupon>` items).
    pub list_root: Option<String>,
    /// List filters beyond the common list parameters (`state`).
    pub filters: Vec<String>,
    /// Other query parameters the endpoint reads (`refund`, `next_renewal_date`).
    pub query: Vec<String>,
    pub doc: String,
}

impl Endpoint {
    /// The `{param}` names of the path, in order.
    pub fn params(&self) -> Vec<&str> {
        self.path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect()
    }
}
