//! Request validation and the error documents of refused requests.
//!
//! Declarative rules (`required_on`, `format`, `validate_since` in `schema/`) are generated into
//! a [`Validate`] impl per resource; rules that are not declarative live in [`crate::rules`] and
//! are called from the generated impls of resources marked `rules = true`. Rules that need stored
//! state belong to the service, which builds their documents with [`single_error`].

use rebill_xml::{ApiVersion, DecodeError, DecodeErrorKind, Mode, WireContext, XmlResource};

use crate::{ApiError, Errors, FieldError};

/// The request operation being validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// One refused field: `field="model.path"`, a symbol and the human text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub symbol: &'static str,
    pub message: String,
}

/// Collects violations while a request value is walked.
pub struct Validation<'c> {
    ctx: &'c WireContext,
    op: Operation,
    violations: Vec<Violation>,
}

/// Implemented (generated) for every resource.
pub trait Validate {
    /// Checks the value found at `path` (`subscription.account`).
    fn validate(&self, v: &mut Validation<'_>, path: &str);
    /// Element names of the child fields that hold a value (for "nothing else beside X" rules).
    fn given(&self) -> Vec<&'static str>;
}

fn join(path: &str, element: &str) -> String {
    format!("{path}.{element}")
}

/// The text a request field holds: one string, or each string of a `values` list.
pub trait Texts {
    /// Calls `f` with each string (and its index in a list).
    fn each_text(&self, f: &mut dyn FnMut(Option<usize>, &str));
}

impl Texts for Option<String> {
    fn each_text(&self, f: &mut dyn FnMut(Option<usize>, &str)) {
        if let Some(s) = self {
            f(None, s);
        }
    }
}

impl Texts for Option<Vec<String>> {
    fn each_text(&self, f: &mut dyn FnMut(Option<usize>, &str)) {
        for (i, s) in self.iter().flatten().enumerate() {
            f(Some(i), s);
        }
    }
}

/// The characters a code may hold besides ASCII letters and digits (`schema/README.md`).
pub const CODE_CHARACTERS: &str = "-_.+@";

/// Whether `code` is a usable identifier in a URL path: ASCII letters, digits and
/// [`CODE_CHARACTERS`], not containing `..` (so never `.` or `..` as a path segment either).
pub fn is_code(code: &str) -> bool {
    !code.is_empty()
        && code != "."
        && !code.contains("..")
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || CODE_CHARACTERS.as_bytes().contains(&b))
}

impl<'c> Validation<'c> {
    pub fn new(ctx: &'c WireContext, op: Operation) -> Self {
        Self { ctx, op, violations: Vec::new() }
    }

    pub fn ctx(&self) -> &WireContext {
        self.ctx
    }

    pub fn version(&self) -> ApiVersion {
        self.ctx.version
    }

    pub fn operation(&self) -> Operation {
        self.op
    }

    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Records a violation of `path.element`.
    pub fn add(&mut self, path: &str, element: &str, symbol: &'static str, message: impl Into<String>) {
        self.violations.push(Violation { field: join(path, element), symbol, message: message.into() });
    }

    /// `element` must hold a value on the listed operations.
    pub fn required<T>(&mut self, path: &str, element: &str, value: &Option<T>, on: &[Operation]) {
        if value.is_none() && on.contains(&self.op) {
            self.add(path, element, "blank", "can't be blank");
        }
    }

    pub fn email(&mut self, path: &str, element: &str, value: &Option<String>) {
        if let Some(email) = value
            && !email_address::EmailAddress::is_valid(email)
        {
            self.add(path, element, "invalid_email", "is not a valid email address");
        }
    }

    fn add_at(&mut self, path: &str, element: &str, index: Option<usize>, symbol: &'static str, message: String) {
        let field = match index {
            Some(i) => format!("{path}.{element}[{i}]"),
            None => join(path, element),
        };
        self.violations.push(Violation { field, symbol, message });
    }

    /// Each string of `value` has at most `max` characters.
    pub fn max_length(&mut self, path: &str, element: &str, value: &impl Texts, max: usize) {
        let mut long = Vec::new();
        value.each_text(&mut |i, s| {
            // Counting stops just past the bound, so a huge value costs no more than a short one.
            if s.len() > max && s.chars().take(max + 1).count() > max {
                long.push(i);
            }
        });
        for i in long {
            self.add_at(path, element, i, "too_long", format!("is too long (maximum is {max} characters)"));
        }
    }

    /// Each string of `value` is a code usable as a URL path segment ([`is_code`]). A blank
    /// value (empty or only spaces) is left to the presence rules (`required_on` and the
    /// service's `blank` checks), so that it is reported once, as `blank`.
    pub fn code(&mut self, path: &str, element: &str, value: &impl Texts) {
        let mut bad = Vec::new();
        value.each_text(&mut |i, s| {
            if !s.trim().is_empty() && !is_code(s) {
                bad.push(i);
            }
        });
        for i in bad {
            let message = format!("is invalid (use only letters, digits and {CODE_CHARACTERS}, without ..)");
            self.add_at(path, element, i, "invalid", message);
        }
    }

    /// An ISO 3166-1 alpha-2 code, checked from `since`.
    pub fn country(&mut self, path: &str, element: &str, value: &Option<String>, since: Option<ApiVersion>) {
        if since.is_some_and(|s| self.ctx.version < s) {
            return;
        }
        if let Some(code) = value
            && (code.len() != 2 || rust_iso3166::from_alpha2(&code.to_ascii_uppercase()).is_none())
        {
            self.add(path, element, "invalid", "is not a valid 2-letter ISO 3166-1 country code");
        }
    }

    pub fn nested<T: Validate>(&mut self, path: &str, element: &str, value: &Option<Box<T>>) {
        if let Some(v) = value {
            v.validate(self, &join(path, element));
        }
    }

    pub fn list<T: Validate>(&mut self, path: &str, element: &str, value: &Option<Vec<T>>) {
        for (i, item) in value.iter().flatten().enumerate() {
            item.validate(self, &format!("{path}.{element}[{i}]"));
        }
    }

    /// The 422 document of the violations, or `Ok` when there are none.
    pub fn finish(self) -> Result<(), Errors> {
        if self.violations.is_empty() { Ok(()) } else { Err(errors_document(&self.violations)) }
    }
}

/// Validates a decoded request body for `op`.
pub fn validate<T: Validate + XmlResource>(value: &T, ctx: &WireContext, op: Operation) -> Result<(), Errors> {
    let mut v = Validation::new(ctx, op);
    value.validate(&mut v, T::ROOT);
    v.finish()
}

/// `<errors>` of `<error field symbol lang="en-US">message</error>`.
pub fn errors_document(violations: &[Violation]) -> Errors {
    Errors {
        errors: Some(
            violations
                .iter()
                .map(|v| FieldError {
                    field: Some(v.field.clone()),
                    symbol: Some(v.symbol.to_owned()),
                    lang: Some("en-US".to_owned()),
                    message: Some(v.message.clone()),
                })
                .collect(),
        ),
        ..Errors::default()
    }
}

/// `<error><symbol>…</symbol><description lang="en-US">…</description></error>`.
pub fn single_error(symbol: &str, description: &str) -> ApiError {
    ApiError { symbol: Some(symbol.to_owned()), description: Some(description.to_owned()), details: None }
}

/// The documents of the single-error refusals that need stored state (checked by the service).
pub mod refusals {
    use super::single_error;
    use crate::ApiError;

    /// 404 for an unknown identifier or route.
    pub fn not_found(description: &str) -> ApiError {
        single_error("not_found", description)
    }

    /// 422 while another change to the subscription is in progress.
    pub fn simultaneous_request() -> ApiError {
        single_error("simultaneous_request", "A change to this subscription is already in progress; retry shortly.")
    }

    /// 422 when imported_trial is changed on a subscription that is not in a trial.
    pub fn imported_trial_not_in_trial() -> ApiError {
        single_error("invalid_transition", "imported_trial can only be changed on a subscription in a trial.")
    }

    /// 422 when resume is asked of a subscription that is not paused.
    pub fn not_paused() -> ApiError {
        single_error("invalid_transition", "Only a paused subscription can be resumed.")
    }

    /// 422 when void is asked of an invoice without a balance to void.
    pub fn nothing_to_void() -> ApiError {
        single_error("invalid_transition", "Only a credit invoice with a balance can be voided.")
    }

    /// 422 when an account has nothing to invoice.
    pub fn will_not_invoice() -> ApiError {
        single_error("will_not_invoice", "No charges to invoice")
    }
}

/// A refused request body: 400 `invalid_xml` or 422 validation errors.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// 400: not acceptable XML (or elements the resource does not know).
    InvalidXml(ApiError),
    /// 422: well-formed, but a value or element is not acceptable.
    Invalid(Errors),
}

impl Rejection {
    pub fn status(&self) -> u16 {
        match self {
            Rejection::InvalidXml(_) => 400,
            Rejection::Invalid(_) => 422,
        }
    }

    /// The response body.
    pub fn to_xml(&self, ctx: &WireContext) -> String {
        match self {
            Rejection::InvalidXml(e) => rebill_xml::to_xml(e, ctx, Mode::Response),
            Rejection::Invalid(e) => rebill_xml::to_xml(e, ctx, Mode::Response),
        }
    }
}

/// The document answering a request body that failed to decode.
pub fn reject_decode(err: &DecodeError) -> Rejection {
    let path = err.path();
    let field = |symbol: &'static str, message: String| {
        Rejection::Invalid(errors_document(&[Violation { field: path.clone(), symbol, message }]))
    };
    match err.kind() {
        DecodeErrorKind::InvalidValue { expected, .. } => match expected.as_str() {
            "an integer" | "a decimal number" => field("not_a_number", "is not a number".to_owned()),
            other if other.starts_with("a valid ") => {
                field("inclusion", format!("is not included in the list ({other})"))
            }
            other => field("invalid", format!("is not {other}")),
        },
        DecodeErrorKind::NilNotAllowed => field("blank", "can't be blank".to_owned()),
        DecodeErrorKind::NotAtVersion(v) => field("invalid", format!("is not accepted at API version {v}")),
        DecodeErrorKind::FeatureRequired(f) => field("invalid", format!("requires the {f} site feature")),
        DecodeErrorKind::ResponseOnly => field("invalid", "is read-only".to_owned()),
        DecodeErrorKind::UnknownElement => {
            let tag = path.rsplit('.').next().unwrap_or_default();
            Rejection::InvalidXml(ApiError {
                symbol: Some("invalid_xml".to_owned()),
                description: Some("The provided XML was invalid.".to_owned()),
                details: Some(format!("Unacceptable tags <{tag}> at {path}")),
            })
        }
        _ => Rejection::InvalidXml(ApiError {
            symbol: Some("invalid_xml".to_owned()),
            description: Some("The provided XML was invalid.".to_owned()),
            details: Some(err.to_string()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use rebill_xml::{Features, version::LATEST_VERSION};

    use super::*;

    fn violations(check: impl FnOnce(&mut Validation<'_>)) -> Vec<(String, &'static str, String)> {
        let ctx = WireContext::new(LATEST_VERSION, Features::none(), "https://x");
        let mut v = Validation::new(&ctx, Operation::Create);
        check(&mut v);
        v.violations().iter().map(|x| (x.field.clone(), x.symbol, x.message.clone())).collect()
    }

    #[test]
    fn codes_are_path_segments() {
        for good in ["a1", "gold-plan", "user@example.com", "abc_123", "user+tag@example.com", "a.b", "-", "_"] {
            assert!(is_code(good), "{good}");
        }
        for bad in ["", ".", "..", "a..b", "../x", "a/b", "a b", "a%20", "ü", "a\u{0}", "a?b", "a#b", "a\\b", "~"] {
            assert!(!is_code(bad), "{bad}");
        }
    }

    #[test]
    fn lengths_count_characters_and_name_list_items() {
        let five = Some("ééééé".to_owned());
        assert_eq!(violations(|v| v.max_length("a", "name", &five, 5)), vec![]);
        assert_eq!(
            violations(|v| v.max_length("a", "name", &five, 4)),
            vec![("a.name".to_owned(), "too_long", "is too long (maximum is 4 characters)".to_owned())]
        );
        let list = Some(vec!["ok".to_owned(), "toolong".to_owned()]);
        assert_eq!(
            violations(|v| v.max_length("a", "codes", &list, 3)),
            vec![("a.codes[1]".to_owned(), "too_long", "is too long (maximum is 3 characters)".to_owned())]
        );
        assert_eq!(violations(|v| v.max_length("a", "name", &None::<String>, 1)), vec![]);
    }

    #[test]
    fn codes_leave_blank_values_to_the_presence_rules() {
        let message = "is invalid (use only letters, digits and -_.+@, without ..)".to_owned();
        assert_eq!(violations(|v| v.code("a", "code", &Some(String::new()))), vec![]);
        assert_eq!(violations(|v| v.code("a", "code", &Some("  ".to_owned()))), vec![]);
        assert_eq!(
            violations(|v| v.code("a", "code", &Some("a/b".to_owned()))),
            vec![("a.code".to_owned(), "invalid", message.clone())]
        );
        let list = Some(vec!["../".to_owned(), "fine".to_owned()]);
        assert_eq!(violations(|v| v.code("a", "codes", &list)), vec![("a.codes[0]".to_owned(), "invalid", message)]);
    }
}
