//! Broken schema snippets are rejected with a message naming the file and the field.

use rebill_schema::load_sources;

const VERSIONS: &str = r#"
versions = ["2.0", "2.2", "2.10", "2.11"]
default = "2.0"
[features.credit_memos]
doc = "Credit Memos"
"#;

fn load(resource: &str) -> Result<rebill_schema::Schema, String> {
    let sources =
        vec![("versions.toml".to_owned(), VERSIONS.to_owned()), ("widget.toml".to_owned(), resource.to_owned())];
    load_sources(&sources).map_err(|e| e.to_string())
}

fn widget(fields: &str) -> String {
    format!(
        "[resource]\nname = \"widget\"\nplural = \"widgets\"\nhref = \"/v2/widgets/{{code}}\"\ndoc = \"A widget.\"\n\n[[fields]]\nname = \"code\"\ntype = \"string\"\ndoc = \"Code.\"\n{fields}"
    )
}

#[test]
fn a_valid_snippet_loads() {
    let schema = load(&widget(
        "[[fields]]\nname = \"total\"\ntype = \"cents\"\nrenames = [{ until = \"2.10\", element = \"a\" }, { since = \"2.10\", element = \"b\" }]\ndoc = \"Total.\"\n",
    ))
    .expect("valid");
    assert_eq!(schema.resources[0].fields.len(), 2);
}

#[test]
fn unknown_type() {
    let e = load(&widget("[[fields]]\nname = \"size\"\ntype = \"bigint\"\ndoc = \"Size.\"\n")).expect_err("type");
    assert_eq!(
        e,
        "schema/widget.toml: field `size`: unknown type `bigint` (string, integer, boolean, datetime, date, float, cents, money, enum, resource, list, values, link, anchor, text)"
    );
}

#[test]
fn unknown_version() {
    let e = load(&widget("[[fields]]\nname = \"size\"\ntype = \"integer\"\nsince = \"2.5\"\ndoc = \"Size.\"\n"))
        .expect_err("version");
    assert_eq!(e, "schema/widget.toml: field `size`: unknown version `2.5` (versions.toml lists 2.0, 2.2, 2.10, 2.11)");
}

#[test]
fn two_fields_claim_one_element() {
    let e = load(&widget(
        "[[fields]]\nname = \"code_again\"\ntype = \"string\"\nelement = \"code\"\nsince = \"2.10\"\ndoc = \"Dup.\"\n",
    ))
    .expect_err("collision");
    assert_eq!(
        e,
        "schema/widget.toml: field `code_again`: element `code` is also claimed by field `code` at 2.10 in requests"
    );
    // Disjoint directions may share an element (an embedded object in requests, a link in responses).
    load(&widget(
        "[[fields]]\nname = \"owner\"\ntype = \"string\"\ndirection = \"request\"\ndoc = \"Owner.\"\n[[fields]]\nname = \"owner_href\"\ntype = \"link\"\nelement = \"owner\"\ndirection = \"response\"\ndoc = \"Owner link.\"\n",
    ))
    .expect("disjoint directions");
}

#[test]
fn unknown_feature_gate() {
    let e =
        load(&widget("[[fields]]\nname = \"notes\"\ntype = \"string\"\nfeature = \"gift_wrap\"\ndoc = \"Notes.\"\n"))
            .expect_err("feature");
    assert_eq!(
        e,
        "schema/widget.toml: field `notes`: unknown feature `gift_wrap` (versions.toml declares `credit_memos`)"
    );
}

#[test]
fn overlapping_renames() {
    let e = load(&widget(
        "[[fields]]\nname = \"total\"\ntype = \"cents\"\nrenames = [{ until = \"2.11\", element = \"a\" }, { since = \"2.10\", element = \"b\" }]\ndoc = \"Total.\"\n",
    ))
    .expect_err("overlap");
    assert_eq!(e, "schema/widget.toml: field `total`: rename ranges overlap at 2.10");
    let e = load(&widget(
        "[[fields]]\nname = \"total\"\ntype = \"cents\"\nrenames = [{ until = \"2.2\", element = \"a\" }, { since = \"2.10\", element = \"b\" }]\ndoc = \"Total.\"\n",
    ))
    .expect_err("gap");
    assert_eq!(e, "schema/widget.toml: field `total`: renames leave version 2.2 without a name");
}

#[test]
fn unknown_references() {
    let e = load(&widget("[[fields]]\nname = \"state\"\ntype = \"enum\"\nof = \"widget_state\"\ndoc = \"State.\"\n"))
        .expect_err("enum");
    assert_eq!(e, "schema/widget.toml: field `state`: unknown enum `widget_state`");
    let e = load(&widget("[[fields]]\nname = \"parts\"\ntype = \"list\"\nof = \"part\"\ndoc = \"Parts.\"\n"))
        .expect_err("resource");
    assert_eq!(e, "schema/widget.toml: field `parts`: unknown resource `part`");
}

#[test]
fn enum_values_need_fallbacks_and_distinct_spellings() {
    let e = load(&widget(
        "[[enums]]\nname = \"widget_state\"\ndoc = \"States.\"\nvalues = [{ name = \"active\" }, { name = \"paused\", since = \"2.11\" }]\n",
    ))
    .expect_err("fallback");
    assert_eq!(
        e,
        "schema/widget.toml: enum `widget_state` value `paused`: a value with since, until or feature needs a fallback"
    );
    let e = load(&widget(
        "[[enums]]\nname = \"widget_state\"\ndoc = \"States.\"\nvalues = [{ name = \"open\" }, { name = \"pending\", value = \"open\" }]\n",
    ))
    .expect_err("same spelling");
    assert_eq!(
        e,
        "schema/widget.toml: enum `widget_state`: values `open` and `pending` are both spelled `open` at 2.0"
    );
}

#[test]
fn typos_and_syntax_errors_name_the_file() {
    let e = load(&widget("[[fields]]\nname = \"size\"\ntype = \"integer\"\nsinse = \"2.2\"\ndoc = \"Size.\"\n"))
        .expect_err("typo");
    assert!(e.starts_with("schema/widget.toml: ") && e.contains("unknown field `sinse`"), "{e}");
    let e = load("[resource\nname = ").expect_err("syntax");
    assert!(e.starts_with("schema/widget.toml: "), "{e}");
}

#[test]
fn href_must_name_an_identifier_field() {
    let text = widget("").replace("{code}", "{id}");
    assert_eq!(
        load(&text).expect_err("href"),
        "schema/widget.toml: resource: href `/v2/widgets/{id}` names `id`, which is not a string or integer field"
    );
}

#[test]
fn versions_file_is_checked() {
    let sources = vec![("versions.toml".to_owned(), "versions = [\"2.2\", \"2.0\"]\ndefault = \"2.0\"\n".to_owned())];
    assert_eq!(
        load_sources(&sources).expect_err("order").to_string(),
        "schema/versions.toml: versions: `2.0` is out of order (oldest first, no repeats)"
    );
}

#[test]
fn text_fields_stand_alone() {
    let text = "[resource]\nname = \"widget\"\ndoc = \"A widget.\"\n\n[[fields]]\nname = \"code\"\ntype = \"string\"\nattribute = \"code\"\ndoc = \"Code.\"\n\n[[fields]]\nname = \"message\"\ntype = \"text\"\ndoc = \"Message.\"\n";
    load(text).expect("attribute plus text");
    let e = load(&format!("{text}\n[[fields]]\nname = \"extra\"\ntype = \"integer\"\ndoc = \"Extra.\"\n"))
        .expect_err("child beside text");
    assert_eq!(
        e,
        "schema/widget.toml: field `extra`: resource has a text field (`message`), so every other field must be an attribute"
    );
    let e = load(&widget("[[fields]]\nname = \"parts\"\ntype = \"string\"\ninline = true\ndoc = \"Parts.\"\n"))
        .expect_err("inline");
    assert_eq!(e, "schema/widget.toml: field `parts`: `inline` applies only to type `list`");
}

fn load_endpoints(endpoints: &str) -> Result<rebill_schema::Schema, String> {
    let sources = vec![
        ("versions.toml".to_owned(), VERSIONS.to_owned()),
        ("widget.toml".to_owned(), widget("")),
        ("endpoints.toml".to_owned(), endpoints.to_owned()),
    ];
    load_sources(&sources).map_err(|e| e.to_string())
}

const GET_WIDGET: &str = "[[endpoints]]\nname = \"get_widget\"\nmethod = \"GET\"\npath = \"/v2/widgets/{code}\"\nresponse = \"widget\"\nstatus = 200\ndoc = \"One widget.\"\n";

#[test]
fn endpoints_are_checked() {
    let schema = load_endpoints(GET_WIDGET).expect("valid");
    assert_eq!(schema.endpoints[0].params(), vec!["code"]);
    let e =
        load_endpoints(&GET_WIDGET.replace("response = \"widget\"", "response = \"gadget\"")).expect_err("resource");
    assert_eq!(e, "schema/endpoints.toml: endpoint `get_widget`: unknown resource `gadget`");
    let twice = format!("{GET_WIDGET}\n{}", GET_WIDGET.replace("get_widget", "fetch_widget").replace("{code}", "{id}"));
    assert_eq!(
        load_endpoints(&twice).expect_err("same route"),
        "schema/endpoints.toml: endpoint `fetch_widget`: GET /v2/widgets/{id} is also endpoint `get_widget`"
    );
    let e = load_endpoints(&GET_WIDGET.replace("status = 200", "status = 204")).expect_err("status");
    assert_eq!(
        e,
        "schema/endpoints.toml: endpoint `get_widget`: status 204 does not fit the response (200/201 with a body, 202 with a resource, 201/202/204 without)"
    );
    let e = load_endpoints(&GET_WIDGET.replace("GET", "PATCH")).expect_err("method");
    assert_eq!(e, "schema/endpoints.toml: endpoint `get_widget`: unknown method `PATCH` (GET, POST, PUT or DELETE)");
    let e = load_endpoints(&GET_WIDGET.replace("/v2/widgets/{code}", "/v2/widgets/:code")).expect_err("colon");
    assert_eq!(
        e,
        "schema/endpoints.toml: endpoint `get_widget`: path segment `:code` is neither a name nor a `{param}`"
    );
    let e = load_endpoints(&GET_WIDGET.replace("status = 200", "status = 200\nlist_root = \"gadgets\""))
        .expect_err("list root");
    assert_eq!(e, "schema/endpoints.toml: endpoint `get_widget`: list_root applies only to list endpoints");

    // What older versions are answered: 404 unless the table says unavailable, which needs a since.
    assert_eq!(
        load_endpoints(GET_WIDGET).expect("valid").endpoints[0].below_since,
        rebill_schema::BelowSince::NotFound
    );
    let gated = GET_WIDGET.replace("status = 200", "status = 200\nsince = \"2.10\"\nbelow_since = \"unavailable\"");
    let schema = load_endpoints(&gated).expect("valid");
    assert_eq!(schema.endpoints[0].below_since, rebill_schema::BelowSince::Unavailable);
    let e = load_endpoints(&GET_WIDGET.replace("status = 200", "status = 200\nbelow_since = \"unavailable\""))
        .expect_err("no since");
    assert_eq!(e, "schema/endpoints.toml: endpoint `get_widget`: below_since needs a since version");
    let e = load_endpoints(&gated.replace("\"unavailable\"", "\"gone\"")).expect_err("unknown answer");
    assert_eq!(
        e,
        "schema/endpoints.toml: endpoint `get_widget`: unknown below_since `gone` (not_found or unavailable)"
    );
}

#[test]
fn request_strings_get_bounds() {
    let schema = load(&widget(
        "[[fields]]\nname = \"slug\"\ntype = \"string\"\nformat = \"code\"\ndoc = \"Slug.\"\n\
         [[fields]]\nname = \"notes\"\ntype = \"string\"\nmax_length = 4000\ndoc = \"Notes.\"\n\
         [[fields]]\nname = \"tags\"\ntype = \"values\"\nof = \"string\"\nitem = \"tag\"\nformat = \"code\"\ndoc = \"Tags.\"\n\
         [[fields]]\nname = \"label\"\ntype = \"string\"\ndirection = \"response\"\ndoc = \"Label.\"\n\
         [[fields]]\nname = \"size\"\ntype = \"integer\"\ndoc = \"Size.\"\n",
    ))
    .expect("valid");
    let bounds: Vec<(&str, Option<usize>)> =
        schema.resources[0].fields.iter().map(|f| (f.name.as_str(), f.max_length)).collect();
    assert_eq!(
        bounds,
        vec![
            ("code", Some(255)),
            ("slug", Some(50)),
            ("notes", Some(4000)),
            ("tags", Some(50)),
            ("label", None),
            ("size", None)
        ]
    );
}

#[test]
fn broken_bounds_and_fixed_attributes() {
    let cases = [
        ("type = \"integer\"\nmax_length = 5", "max_length applies to string, text and string values fields"),
        (
            "type = \"string\"\ndirection = \"response\"\nmax_length = 5",
            "max_length applies to fields a request can carry",
        ),
        ("type = \"string\"\nmax_length = 0", "max_length must be at least 1"),
        ("type = \"string\"\nformat = \"code\"\nmax_length = 51", "a code has at most 50 characters"),
        ("type = \"integer\"\nformat = \"code\"", "formats apply to string fields (and `code` to string values)"),
        ("type = \"string\"\nformat = \"slug\"", "unknown format `slug` (email, country or code)"),
        ("type = \"integer\"\nfixed_attributes = { lang = \"en-US\" }", "fixed_attributes apply to string fields"),
        ("type = \"string\"\nfixed_attributes = { nil = \"nil\" }", "`nil` cannot be a fixed attribute"),
        ("type = \"string\"\nfixed_attributes = { \"a b\" = \"x\" }", "`a b` cannot be a fixed attribute"),
    ];
    for (body, message) in cases {
        let e = load(&widget(&format!("[[fields]]\nname = \"size\"\n{body}\ndoc = \"Size.\"\n"))).expect_err(body);
        assert_eq!(e, format!("schema/widget.toml: field `size`: {message}"), "{body}");
    }
}

#[test]
fn href_only_fields_live_in_the_root_href() {
    // A field named only in the href: the code of an owning resource.
    let owned = |fields: &str| {
        widget(fields).replace("href = \"/v2/widgets/{code}\"", "href = \"/v2/owners/{owner}/widget/{code}\"")
    };
    let schema =
        load(&owned("[[fields]]\nname = \"owner\"\ntype = \"string\"\ndirection = \"response\"\nhref_only = true\ndoc = \"Owner.\"\n"))
            .expect("valid");
    let owner = schema.resources[0].fields.iter().find(|f| f.name == "owner").expect("owner");
    assert!(owner.href_only && owner.max_length.is_none());
    let cases = [
        ("type = \"string\"\nhref_only = true", "href_only applies to response-only string fields"),
        (
            "type = \"integer\"\ndirection = \"response\"\nhref_only = true",
            "href_only applies to response-only string fields",
        ),
        (
            "type = \"string\"\ndirection = \"response\"\nhref_only = true\nelement = \"o\"",
            "an href_only field lives in the root href: no element, renames, attribute, omit_empty, required or fixed_attributes",
        ),
        (
            "type = \"string\"\ndirection = \"response\"\nhref_only = true\nomit_empty = true",
            "an href_only field lives in the root href: no element, renames, attribute, omit_empty, required or fixed_attributes",
        ),
    ];
    for (body, message) in cases {
        let e = load(&owned(&format!("[[fields]]\nname = \"owner\"\n{body}\ndoc = \"Owner.\"\n"))).expect_err(body);
        assert_eq!(e, format!("schema/widget.toml: field `owner`: {message}"), "{body}");
    }
    // Not in the href.
    let e = load(&widget(
        "[[fields]]\nname = \"owner\"\ntype = \"string\"\ndirection = \"response\"\nhref_only = true\ndoc = \"Owner.\"\n",
    ))
    .expect_err("not in the href");
    assert_eq!(e, "schema/widget.toml: field `owner`: an href_only field must be named in the resource's href");
    // Parameters are whole path segments, so they can be read back from an href.
    let e = load(&widget("").replace("{code}", "w-{code}")).expect_err("partial segment");
    assert_eq!(
        e,
        "schema/widget.toml: resource: href `/v2/widgets/w-{code}`: each `{name}` must be a whole path segment"
    );
}
