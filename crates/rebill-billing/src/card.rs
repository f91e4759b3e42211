//! Card numbers and bank accounts: the one set of checks shared by the token endpoint and
//! billing-info updates.
//!
//! - Numbers are cleaned of spaces and dashes only (letters stay and make the number invalid),
//!   must have 12 to 19 digits and pass the Luhn check with a non-zero sum.
//! - Brands follow the token library's table (first match wins; the length must fit unless a
//!   partial number is asked about); [`Brand::code`] is the library's name (`visa`, `master`, …),
//!   [`Brand::display_name`] the `card_type` written in billing-info documents (`Visa`, …).
//! - An expiry (month 1–12; a year below 100 means 20YY) is valid until 00:00 UTC on the first
//!   day of the month after it.
//! - A CVV is 3 or 4 digits; American Express cards take four, every other brand three.
//! - Bank accounts: a 9-digit ABA routing number with a valid check digit, a 4–17 digit account
//!   number (and its confirmation where one is asked for), `checking` or `savings`, and a name.
//!
//! [`validate_card`] and [`validate_bank_account`] report every problem at once, per [`Field`],
//! so that each caller names the fields in its own vocabulary (token parameters or
//! `billing_info.*` elements). [`Card`] and [`BankAccount`] never print their secrets in `Debug`.

use std::fmt;

use chrono::{Datelike, NaiveDate};

/// A card brand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Brand {
    Visa,
    Master,
    AmericanExpress,
    Discover,
    DinersClub,
    Jcb,
    Unknown,
}

/// Prefix ranges (inclusive, compared on the first `digits` digits) and lengths of one brand.
struct BrandRule {
    brand: Brand,
    prefixes: &'static [(u32, u32, usize)],
    lengths: &'static [usize],
}

/// The token library's brand table, in match order.
const BRANDS: &[BrandRule] = &[
    BrandRule {
        brand: Brand::Discover,
        prefixes: &[(6011, 6011, 4), (622, 622, 3), (644, 649, 3), (65, 65, 2)],
        lengths: &[16],
    },
    BrandRule { brand: Brand::Master, prefixes: &[(51, 55, 2), (222_100, 272_099, 6)], lengths: &[16] },
    BrandRule { brand: Brand::AmericanExpress, prefixes: &[(34, 34, 2), (37, 37, 2)], lengths: &[15] },
    BrandRule { brand: Brand::Visa, prefixes: &[(4, 4, 1)], lengths: &[13, 16] },
    BrandRule { brand: Brand::Jcb, prefixes: &[(3528, 3589, 4)], lengths: &[16] },
    BrandRule {
        brand: Brand::DinersClub,
        prefixes: &[
            (300, 305, 3),
            (309, 309, 3),
            (36, 36, 2),
            (38, 39, 2),
            (54, 55, 2),
            (2014, 2014, 4),
            (2149, 2149, 4),
        ],
        lengths: &[14],
    },
];

impl Brand {
    /// Every brand, `Unknown` last.
    pub const ALL: [Brand; 7] = [
        Brand::Visa,
        Brand::Master,
        Brand::AmericanExpress,
        Brand::Discover,
        Brand::DinersClub,
        Brand::Jcb,
        Brand::Unknown,
    ];

    /// The token library's name (`visa`, `master`, `american_express`, `discover`,
    /// `diners_club`, `jcb`, `unknown`); this is what the store keeps.
    pub fn code(self) -> &'static str {
        match self {
            Brand::Visa => "visa",
            Brand::Master => "master",
            Brand::AmericanExpress => "american_express",
            Brand::Discover => "discover",
            Brand::DinersClub => "diners_club",
            Brand::Jcb => "jcb",
            Brand::Unknown => "unknown",
        }
    }

    /// The `card_type` of billing-info documents (`Visa`, `MasterCard`, …).
    pub fn display_name(self) -> &'static str {
        match self {
            Brand::Visa => "Visa",
            Brand::Master => "MasterCard",
            Brand::AmericanExpress => "American Express",
            Brand::Discover => "Discover",
            Brand::DinersClub => "Diners Club",
            Brand::Jcb => "JCB",
            Brand::Unknown => "Unknown",
        }
    }

    /// The brand named by [`Brand::code`].
    pub fn from_code(code: &str) -> Option<Brand> {
        Brand::ALL.into_iter().find(|b| b.code() == code)
    }

    /// The brand of a number (digits only). With `partial`, the length is not checked (a number
    /// being typed: `4` is already `visa`).
    pub fn detect(digits: &str, partial: bool) -> Brand {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Brand::Unknown;
        }
        for rule in BRANDS {
            let prefix_fits = rule.prefixes.iter().any(|&(low, high, width)| {
                digits.get(..width).and_then(|p| p.parse::<u32>().ok()).is_some_and(|p| (low..=high).contains(&p))
            });
            if prefix_fits && (partial || rule.lengths.contains(&digits.len())) {
                return rule.brand;
            }
        }
        Brand::Unknown
    }

    /// Digits of the security code on cards of this brand.
    pub fn cvv_length(self) -> usize {
        if self == Brand::AmericanExpress { 4 } else { 3 }
    }
}

impl fmt::Display for Brand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The number with spaces and dashes removed (nothing else: letters stay and fail later).
pub fn clean_number(raw: &str) -> String {
    raw.chars().filter(|c| *c != '-' && !c.is_whitespace()).collect()
}

/// The Luhn sum of a digit string (every second digit from the right doubled, 9 subtracted
/// above 9); `None` when it holds anything but ASCII digits.
pub fn luhn_sum(digits: &str) -> Option<u32> {
    let mut sum = 0;
    for (i, b) in digits.bytes().rev().enumerate() {
        if !b.is_ascii_digit() {
            return None;
        }
        let mut d = u32::from(b - b'0');
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    Some(sum)
}

/// Whether the digits pass the Luhn check (sum divisible by 10 and not zero).
pub fn luhn_valid(digits: &str) -> bool {
    luhn_sum(digits).is_some_and(|s| s > 0 && s.is_multiple_of(10))
}

/// The digit that makes `payload` followed by it pass the Luhn check (`None` for non-digits).
pub fn luhn_check_digit(payload: &str) -> Option<u8> {
    // With a check digit of 0 appended, every payload digit moves one place left.
    let sum = luhn_sum(&format!("{payload}0"))?;
    Some(((10 - sum % 10) % 10) as u8)
}

/// Whether a raw card number is valid: cleaned of spaces and dashes, 12 to 19 digits, Luhn.
pub fn is_valid_number(raw: &str) -> bool {
    let digits = clean_number(raw);
    (12..=19).contains(&digits.len()) && luhn_valid(&digits)
}

/// The first six digits (the BIN), or the whole number when shorter.
pub fn first_six(digits: &str) -> &str {
    digits.get(..6).unwrap_or(digits)
}

/// The last four digits, or the whole number when shorter.
pub fn last_four(digits: &str) -> &str {
    digits.get(digits.len().saturating_sub(4)..).unwrap_or(digits)
}

/// A card's expiry month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// 1–12.
    pub month: u32,
    /// Four digits.
    pub year: i32,
}

impl Expiry {
    /// A month (1–12) and year (four digits, or two meaning 20YY).
    pub fn new(month: i64, year: i64) -> Option<Expiry> {
        let month = u32::try_from(month).ok().filter(|m| (1..=12).contains(m))?;
        let year = if (0..100).contains(&year) { year + 2000 } else { year };
        let year = i32::try_from(year).ok().filter(|y| (1000..=9999).contains(y))?;
        Some(Expiry { month, year })
    }

    /// Parses the text of a month and a year field (surrounding spaces ignored).
    pub fn parse(month: &str, year: &str) -> Option<Expiry> {
        Expiry::new(month.trim().parse().ok()?, year.trim().parse().ok()?)
    }

    /// The first instant the card is no longer valid: 00:00 UTC on the first day of the month
    /// after the expiry month (UTC epoch seconds).
    pub fn ends_at(&self) -> i64 {
        let (year, month) = if self.month == 12 { (self.year + 1, 1) } else { (self.year, self.month + 1) };
        NaiveDate::from_ymd_opt(year, month, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc().timestamp())
            .unwrap_or(i64::MAX)
    }

    /// Whether the card has expired at `now` (UTC epoch seconds).
    pub fn is_expired_at(&self, now: i64) -> bool {
        now >= self.ends_at()
    }

    /// The expiry of the month that holds `now` (handy for tests and sandbox data).
    pub fn of_month(now: i64) -> Option<Expiry> {
        let t = chrono::DateTime::<chrono::Utc>::from_timestamp(now, 0)?;
        Some(Expiry { month: t.month(), year: t.year() })
    }
}

/// Whether a security code has the shape of one: 3 or 4 digits once trimmed.
pub fn is_cvv_shaped(cvv: &str) -> bool {
    let cvv = cvv.trim();
    (3..=4).contains(&cvv.len()) && cvv.bytes().all(|b| b.is_ascii_digit())
}

/// A field of a card or bank-account entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Number,
    Month,
    Year,
    Cvv,
    FirstName,
    LastName,
    RoutingNumber,
    AccountNumber,
    AccountNumberConfirmation,
    AccountType,
    NameOnAccount,
}

impl Field {
    /// The parameter name of the token endpoint.
    pub fn token_param(self) -> &'static str {
        match self {
            Field::Number => "number",
            Field::Month => "month",
            Field::Year => "year",
            Field::Cvv => "cvv",
            Field::FirstName => "first_name",
            Field::LastName => "last_name",
            Field::RoutingNumber => "routing_number",
            Field::AccountNumber => "account_number",
            Field::AccountNumberConfirmation => "account_number_confirmation",
            Field::AccountType => "account_type",
            Field::NameOnAccount => "name_on_account",
        }
    }

    /// The element name under `<billing_info>`.
    pub fn billing_info_element(self) -> &'static str {
        match self {
            Field::Cvv => "verification_value",
            other => other.token_param(),
        }
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Missing or only spaces.
    Blank,
    /// Present but not acceptable.
    Invalid,
    /// A well-formed expiry that has passed.
    Expired,
    /// A confirmation that differs from what it confirms.
    DoesNotMatch,
    /// A well-formed security code of the wrong length for the card's brand.
    CvvLength(usize),
}

impl Problem {
    /// The `symbol` of a field error.
    pub fn symbol(self) -> &'static str {
        match self {
            Problem::Blank => "blank",
            Problem::Invalid | Problem::CvvLength(_) => "invalid",
            Problem::Expired => "expired",
            Problem::DoesNotMatch => "does_not_match",
        }
    }

    /// The human text of a field error.
    pub fn message(self) -> String {
        match self {
            Problem::Blank => "can't be blank".to_owned(),
            Problem::Invalid => "is invalid".to_owned(),
            Problem::Expired => "is expired".to_owned(),
            Problem::DoesNotMatch => "does not match".to_owned(),
            Problem::CvvLength(4) => "must be four digits".to_owned(),
            Problem::CvvLength(3) => "must be three digits".to_owned(),
            Problem::CvvLength(n) => format!("must be {n} digits"),
        }
    }
}

/// One refused field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldError {
    pub field: Field,
    pub problem: Problem,
}

/// A card entry as sent (text of each field; `None` when absent).
#[derive(Clone, Copy, Default)]
pub struct CardInput<'a> {
    pub number: Option<&'a str>,
    pub month: Option<&'a str>,
    pub year: Option<&'a str>,
    pub cvv: Option<&'a str>,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
}

impl fmt::Debug for CardInput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CardInput")
            .field("number", &self.number.map(|_| "[redacted]"))
            .field("month", &self.month)
            .field("year", &self.year)
            .field("cvv", &self.cvv.map(|_| "[redacted]"))
            .field("first_name", &self.first_name)
            .field("last_name", &self.last_name)
            .finish()
    }
}

/// A validated card. `Debug` shows only the brand, first six, last four and expiry.
#[derive(Clone, PartialEq, Eq)]
pub struct Card {
    /// Digits only.
    pub number: String,
    pub brand: Brand,
    pub expiry: Expiry,
    /// Digits only; used once for a verification and never stored beyond a token's lifetime.
    pub cvv: Option<String>,
}

impl Card {
    pub fn first_six(&self) -> &str {
        first_six(&self.number)
    }

    pub fn last_four(&self) -> &str {
        last_four(&self.number)
    }
}

impl fmt::Debug for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Card")
            .field("brand", &self.brand)
            .field("first_six", &self.first_six())
            .field("last_four", &self.last_four())
            .field("expiry", &self.expiry)
            .field("cvv", &self.cvv.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

fn blank(value: Option<&str>) -> bool {
    value.is_none_or(|v| v.trim().is_empty())
}

/// Checks a card entry at `now` (UTC epoch seconds). Errors come in field order: number, month,
/// year, first_name, last_name, cvv. An expiry that cannot be read or has passed marks both month
/// and year; a blank month or year marks only itself.
pub fn validate_card(input: &CardInput<'_>, now: i64) -> Result<Card, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut push = |field, problem| errors.push(FieldError { field, problem });

    let digits = input.number.map(clean_number).unwrap_or_default();
    let number_ok = if blank(input.number) {
        push(Field::Number, Problem::Blank);
        false
    } else if !is_valid_number(&digits) {
        push(Field::Number, Problem::Invalid);
        false
    } else {
        true
    };

    let mut expiry = None;
    match (input.month.filter(|m| !m.trim().is_empty()), input.year.filter(|y| !y.trim().is_empty())) {
        (Some(m), Some(y)) => match Expiry::parse(m, y) {
            Some(e) if e.is_expired_at(now) => {
                push(Field::Month, Problem::Expired);
                push(Field::Year, Problem::Expired);
            }
            Some(e) => expiry = Some(e),
            None => {
                push(Field::Month, Problem::Invalid);
                push(Field::Year, Problem::Invalid);
            }
        },
        (m, y) => {
            if m.is_none() {
                push(Field::Month, Problem::Blank);
            }
            if y.is_none() {
                push(Field::Year, Problem::Blank);
            }
        }
    }

    if blank(input.first_name) {
        push(Field::FirstName, Problem::Blank);
    }
    if blank(input.last_name) {
        push(Field::LastName, Problem::Blank);
    }

    let brand = Brand::detect(&digits, false);
    let cvv = input.cvv.map(str::trim).filter(|c| !c.is_empty());
    if let Some(c) = cvv {
        if !is_cvv_shaped(c) {
            push(Field::Cvv, Problem::Invalid);
        } else if number_ok && c.len() != brand.cvv_length() {
            push(Field::Cvv, Problem::CvvLength(brand.cvv_length()));
        }
    }

    match expiry {
        Some(expiry) if errors.is_empty() => Ok(Card { number: digits, brand, expiry, cvv: cvv.map(str::to_owned) }),
        _ => Err(errors),
    }
}

/// Type of a bank account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountType {
    Checking,
    Savings,
}

impl AccountType {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountType::Checking => "checking",
            AccountType::Savings => "savings",
        }
    }

    pub fn parse(text: &str) -> Option<AccountType> {
        match text.trim() {
            "checking" => Some(AccountType::Checking),
            "savings" => Some(AccountType::Savings),
            _ => None,
        }
    }
}

/// Whether a routing number is nine digits with a valid ABA check digit
/// (3·(d1+d4+d7) + 7·(d2+d5+d8) + (d3+d6+d9) divisible by 10, and not all zeros).
pub fn is_valid_routing_number(routing: &str) -> bool {
    let routing = routing.trim();
    if routing.len() != 9 || !routing.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let d: Vec<u32> = routing.bytes().map(|b| u32::from(b - b'0')).collect();
    let sum = 3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + (d[2] + d[5] + d[8]);
    sum > 0 && sum.is_multiple_of(10)
}

/// Whether an account number is 4 to 17 digits.
pub fn is_valid_account_number(account: &str) -> bool {
    let account = account.trim();
    (4..=17).contains(&account.len()) && account.bytes().all(|b| b.is_ascii_digit())
}

/// A bank-account entry as sent.
#[derive(Clone, Copy, Default)]
pub struct BankInput<'a> {
    pub routing_number: Option<&'a str>,
    pub account_number: Option<&'a str>,
    /// Checked only when `confirm` is set (the token endpoint asks for it; billing-info
    /// documents have no such element).
    pub account_number_confirmation: Option<&'a str>,
    pub confirm: bool,
    pub account_type: Option<&'a str>,
    pub name_on_account: Option<&'a str>,
}

impl fmt::Debug for BankInput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BankInput")
            .field("routing_number", &self.routing_number)
            .field("account_number", &self.account_number.map(|_| "[redacted]"))
            .field("confirm", &self.confirm)
            .field("account_type", &self.account_type)
            .field("name_on_account", &self.name_on_account)
            .finish()
    }
}

/// A validated bank account. `Debug` shows the account number's last four digits only.
#[derive(Clone, PartialEq, Eq)]
pub struct BankAccount {
    pub routing_number: String,
    pub account_number: String,
    pub account_type: AccountType,
    pub name_on_account: String,
}

impl BankAccount {
    pub fn last_four(&self) -> &str {
        last_four(&self.account_number)
    }
}

impl fmt::Debug for BankAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BankAccount")
            .field("routing_number", &self.routing_number)
            .field("last_four", &self.last_four())
            .field("account_type", &self.account_type)
            .field("name_on_account", &self.name_on_account)
            .finish()
    }
}

/// Checks a bank-account entry. Errors come in field order: routing_number, account_number,
/// account_number_confirmation, account_type, name_on_account.
pub fn validate_bank_account(input: &BankInput<'_>) -> Result<BankAccount, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut push = |field, problem| errors.push(FieldError { field, problem });
    let routing = input.routing_number.map(str::trim).unwrap_or_default();
    if routing.is_empty() {
        push(Field::RoutingNumber, Problem::Blank);
    } else if !is_valid_routing_number(routing) {
        push(Field::RoutingNumber, Problem::Invalid);
    }
    let account = input.account_number.map(str::trim).unwrap_or_default();
    if account.is_empty() {
        push(Field::AccountNumber, Problem::Blank);
    } else if !is_valid_account_number(account) {
        push(Field::AccountNumber, Problem::Invalid);
    }
    if input.confirm {
        match input.account_number_confirmation.map(str::trim).filter(|c| !c.is_empty()) {
            None => push(Field::AccountNumberConfirmation, Problem::Blank),
            Some(c) if c != account => push(Field::AccountNumberConfirmation, Problem::DoesNotMatch),
            Some(_) => {}
        }
    }
    let account_type = match input.account_type.filter(|t| !t.trim().is_empty()) {
        None => {
            push(Field::AccountType, Problem::Blank);
            None
        }
        Some(t) => {
            let parsed = AccountType::parse(t);
            if parsed.is_none() {
                push(Field::AccountType, Problem::Invalid);
            }
            parsed
        }
    };
    let name = input.name_on_account.map(str::trim).unwrap_or_default();
    if name.is_empty() {
        push(Field::NameOnAccount, Problem::Blank);
    }
    match account_type {
        Some(account_type) if errors.is_empty() => Ok(BankAccount {
            routing_number: routing.to_owned(),
            account_number: account.to_owned(),
            account_type,
            name_on_account: name.to_owned(),
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_codes_are_three_or_four_digits() {
        for good in ["123", "0000", "999", " 123 "] {
            assert!(is_cvv_shaped(good), "{good}");
        }
        for bad in ["", "12", "12345", "12a", "１２３", "-12"] {
            assert!(!is_cvv_shaped(bad), "{bad}");
        }
    }
    use proptest::prelude::*;

    /// 2027-01-15T08:00:00Z.
    const NOW: i64 = 1_800_000_000;

    fn card<'a>(number: &'a str, month: &'a str, year: &'a str, cvv: Option<&'a str>) -> CardInput<'a> {
        CardInput {
            number: Some(number),
            month: Some(month),
            year: Some(year),
            cvv,
            first_name: Some("Verena"),
            last_name: Some("Example"),
        }
    }

    fn problems(result: Result<Card, Vec<FieldError>>) -> Vec<(Field, Problem)> {
        result.expect_err("refused").into_iter().map(|e| (e.field, e.problem)).collect()
    }

    #[test]
    fn brands_follow_the_library_table() {
        let cases = [
            ("4111111111111111", Brand::Visa),
            ("4222222222222", Brand::Visa),
            ("4012888888881881", Brand::Visa),
            ("5555555555554444", Brand::Master),
            ("5105105105105100", Brand::Master),
            ("2223000048400011", Brand::Master),
            ("378282246310005", Brand::AmericanExpress),
            ("371449635398431", Brand::AmericanExpress),
            ("378734493671000", Brand::AmericanExpress),
            ("30569309025904", Brand::DinersClub),
            ("38520000023237", Brand::DinersClub),
            ("6011000990139424", Brand::Discover),
            ("3530111333300000", Brand::Jcb),
            ("3566002020360505", Brand::Jcb),
            ("1234567890123", Brand::Unknown),
            // Right prefix, wrong length.
            ("411111111111111", Brand::Unknown),
        ];
        for (number, brand) in cases {
            assert_eq!(Brand::detect(number, false), brand, "{number}");
        }
        assert_eq!(Brand::detect("4", true), Brand::Visa);
        assert_eq!(Brand::detect("37", true), Brand::AmericanExpress);
        assert_eq!(Brand::detect("2221", true), Brand::Unknown);
        assert_eq!(Brand::detect("222100", true), Brand::Master);
        assert_eq!(Brand::detect("4x", true), Brand::Unknown);
        for b in Brand::ALL {
            assert_eq!(Brand::from_code(b.code()), Some(b));
        }
        assert_eq!(Brand::Master.display_name(), "MasterCard");
        assert_eq!(Brand::AmericanExpress.cvv_length(), 4);
        assert_eq!(Brand::Visa.cvv_length(), 3);
    }

    #[test]
    fn numbers_are_cleaned_of_spaces_and_dashes_only() {
        assert!(is_valid_number("4111 1111-1111 1111"));
        assert!(!is_valid_number("4111a1111111111111"));
        assert!(!is_valid_number("4222222222222222"));
        assert!(!is_valid_number("00000000000000"), "a zero sum is refused");
        assert!(!is_valid_number("42"), "too short");
        assert!(!is_valid_number("41111111111111111111"), "20 digits");
        assert_eq!(first_six("4111111111111111"), "411111");
        assert_eq!(last_four("4111111111111111"), "1111");
        assert_eq!(last_four("12"), "12");
        assert_eq!(luhn_check_digit("411111111111111"), Some(1));
        assert_eq!(luhn_check_digit("4x"), None);
    }

    #[test]
    fn expiry_ends_at_midnight_after_the_month() {
        let e = Expiry::parse("1", "27").expect("expiry");
        assert_eq!(e, Expiry { month: 1, year: 2027 });
        // 2027-02-01T00:00:00Z.
        let end = 1_801_440_000;
        assert_eq!(e.ends_at(), end);
        assert!(!e.is_expired_at(end - 1));
        assert!(e.is_expired_at(end));
        assert_eq!(Expiry::new(12, 2026).map(|e| e.ends_at()), Some(1_798_761_600));
        assert_eq!(Expiry::parse("13", "2030"), None);
        assert_eq!(Expiry::parse("0", "2030"), None);
        assert_eq!(Expiry::parse("ab", "2030"), None);
        assert_eq!(Expiry::parse(" 07 ", "2031"), Some(Expiry { month: 7, year: 2031 }));
        assert_eq!(Expiry::of_month(NOW), Some(Expiry { month: 1, year: 2027 }));
    }

    #[test]
    fn a_good_card_is_accepted() {
        let c = validate_card(&card("4111-1111-1111-1111", "12", "2030", Some(" 123 ")), NOW).expect("valid");
        assert_eq!((c.number.as_str(), c.brand, c.cvv.as_deref()), ("4111111111111111", Brand::Visa, Some("123")));
        assert_eq!((c.first_six(), c.last_four()), ("411111", "1111"));
        let amex = validate_card(&card("378282246310005", "1", "27", Some("1234")), NOW).expect("valid");
        assert_eq!(amex.expiry, Expiry { month: 1, year: 2027 });
        let no_cvv = validate_card(&card("4111111111111111", "12", "2030", None), NOW).expect("valid");
        assert_eq!(no_cvv.cvv, None);
        let debug = format!("{c:?} {:?}", card("4111111111111111", "1", "2030", Some("123")));
        assert!(!debug.contains("4111111111111111") && !debug.contains("123\""), "{debug}");
    }

    #[test]
    fn every_card_problem_is_reported_in_field_order() {
        let input = CardInput { cvv: Some("12a"), ..CardInput::default() };
        assert_eq!(
            problems(validate_card(&input, NOW)),
            vec![
                (Field::Number, Problem::Blank),
                (Field::Month, Problem::Blank),
                (Field::Year, Problem::Blank),
                (Field::FirstName, Problem::Blank),
                (Field::LastName, Problem::Blank),
                (Field::Cvv, Problem::Invalid),
            ]
        );
        assert_eq!(
            problems(validate_card(&card("4222222222222222", "13", "2030", None), NOW)),
            vec![(Field::Number, Problem::Invalid), (Field::Month, Problem::Invalid), (Field::Year, Problem::Invalid)]
        );
        assert_eq!(
            problems(validate_card(&card("4111111111111111", "12", "2026", None), NOW)),
            vec![(Field::Month, Problem::Expired), (Field::Year, Problem::Expired)]
        );
        assert_eq!(
            problems(validate_card(&card("4111111111111111", "12", "2030", Some("1234")), NOW)),
            vec![(Field::Cvv, Problem::CvvLength(3))]
        );
        assert_eq!(
            problems(validate_card(&card("378282246310005", "12", "2030", Some("123")), NOW)),
            vec![(Field::Cvv, Problem::CvvLength(4))]
        );
        assert_eq!(Problem::CvvLength(3).message(), "must be three digits");
        assert_eq!(Problem::CvvLength(4).message(), "must be four digits");
        // The month of `now` is still valid.
        assert!(validate_card(&card("4111111111111111", "1", "2027", None), NOW).is_ok());
    }

    #[test]
    fn bank_accounts_are_checked() {
        assert!(is_valid_routing_number("123456780"));
        assert!(is_valid_routing_number("021000021"));
        assert!(!is_valid_routing_number("123456789"));
        assert!(!is_valid_routing_number("000000000"));
        assert!(!is_valid_routing_number("12345678"));
        let good = BankInput {
            routing_number: Some("123456780"),
            account_number: Some("111111111"),
            account_number_confirmation: Some("111111111"),
            confirm: true,
            account_type: Some("checking"),
            name_on_account: Some("Verena Example"),
        };
        let bank = validate_bank_account(&good).expect("valid");
        assert_eq!((bank.last_four(), bank.account_type), ("1111", AccountType::Checking));
        assert!(!format!("{bank:?} {good:?}").contains("111111111"));
        let bad = BankInput {
            routing_number: Some("123456789"),
            account_number: Some("12x"),
            account_number_confirmation: Some("999"),
            confirm: true,
            account_type: Some("business"),
            name_on_account: Some(" "),
        };
        let problems: Vec<_> =
            validate_bank_account(&bad).expect_err("refused").into_iter().map(|e| (e.field, e.problem)).collect();
        assert_eq!(
            problems,
            vec![
                (Field::RoutingNumber, Problem::Invalid),
                (Field::AccountNumber, Problem::Invalid),
                (Field::AccountNumberConfirmation, Problem::DoesNotMatch),
                (Field::AccountType, Problem::Invalid),
                (Field::NameOnAccount, Problem::Blank),
            ]
        );
        let unconfirmed = BankInput { confirm: false, account_number_confirmation: None, ..good };
        assert!(validate_bank_account(&unconfirmed).is_ok());
        let missing = BankInput { account_number_confirmation: None, ..good };
        assert_eq!(
            validate_bank_account(&missing).expect_err("refused"),
            vec![FieldError { field: Field::AccountNumberConfirmation, problem: Problem::Blank }]
        );
        assert_eq!(Field::Cvv.billing_info_element(), "verification_value");
        assert_eq!(Field::Cvv.token_param(), "cvv");
    }

    proptest! {
        #[test]
        fn numbers_built_with_their_check_digit_pass_luhn(payload in "[1-9][0-9]{10,17}") {
            let check = luhn_check_digit(&payload).expect("digits");
            let number = format!("{payload}{check}");
            prop_assert!(luhn_valid(&number));
            prop_assert!(is_valid_number(&number));
        }

        #[test]
        fn changing_one_digit_breaks_luhn(payload in "[1-9][0-9]{10,17}", position in any::<prop::sample::Index>(), bump in 1u8..10) {
            let check = luhn_check_digit(&payload).expect("digits");
            let mut digits: Vec<u8> = format!("{payload}{check}").into_bytes();
            let i = position.index(digits.len());
            digits[i] = b'0' + (digits[i] - b'0' + bump) % 10;
            let changed = String::from_utf8(digits).expect("ascii");
            prop_assert!(!luhn_valid(&changed), "{changed}");
        }
    }
}
