//! Random values for property tests (feature `arbitrary`). The derive macros implement
//! [`Arbitrary`] for generated models; [`strategy`] turns any of them into a proptest strategy.

use chrono::{DateTime, NaiveDate, Utc};
use proptest::prelude::Rng;
use proptest::strategy::{Just, Strategy};
use proptest::test_runner::TestRng;

use crate::value::{Href, Money};

/// Deepest nesting of resources generated (the schema is recursive through
/// `pending_subscription`).
const MAX_DEPTH: usize = 3;

/// The random source handed to [`Arbitrary`] implementations.
pub struct Gen {
    rng: TestRng,
    depth: usize,
}

impl Gen {
    pub fn new(rng: TestRng) -> Self {
        Self { rng, depth: 0 }
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.next_u64() % n }
    }

    pub fn coin(&mut self) -> bool {
        self.below(2) == 0
    }

    pub fn pick<'x, T>(&mut self, items: &'x [T]) -> &'x T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Generates a nested value one level deeper, or `None` past the depth limit.
    pub fn nested<T: Arbitrary>(&mut self) -> Option<T> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let v = T::arbitrary(self);
        self.depth -= 1;
        Some(v)
    }
}

/// Generates a random value.
pub trait Arbitrary: Sized {
    fn arbitrary(g: &mut Gen) -> Self;
}

/// A proptest strategy producing `T` values.
pub fn strategy<T: Arbitrary + std::fmt::Debug + Clone>() -> impl Strategy<Value = T> {
    Just(()).prop_perturb(|(), rng| T::arbitrary(&mut Gen::new(rng)))
}

const SAMPLE_CHARS: &[char] = &[
    'a', 'b', 'Z', '0', '9', ' ', '-', '_', '.', '@', '&', '<', '>', '"', '\'', ';', '#', '\n', '\t', '\r', 'é', 'ß',
    '中', '🙂', ']', '=',
];

impl Arbitrary for String {
    fn arbitrary(g: &mut Gen) -> Self {
        let len = g.below(12);
        (0..len).map(|_| *g.pick(SAMPLE_CHARS)).collect()
    }
}

impl Arbitrary for i64 {
    fn arbitrary(g: &mut Gen) -> Self {
        match g.below(4) {
            0 => 0,
            1 => g.below(10_000) as i64 - 5_000,
            2 => g.rng.next_u64() as i64,
            _ => *g.pick(&[i64::MIN, i64::MAX, -1, 1]),
        }
    }
}

impl Arbitrary for bool {
    fn arbitrary(g: &mut Gen) -> Self {
        g.coin()
    }
}

impl Arbitrary for f64 {
    fn arbitrary(g: &mut Gen) -> Self {
        match g.below(3) {
            0 => g.below(100_000) as f64 / 10_000.0,
            1 => *g.pick(&[0.0, -0.0, 1e-9, 123_456_789.125, f64::MAX, f64::MIN_POSITIVE]),
            _ => {
                let v = f64::from_bits(g.rng.next_u64());
                if v.is_finite() { v } else { 0.5 }
            }
        }
    }
}

impl Arbitrary for DateTime<Utc> {
    fn arbitrary(g: &mut Gen) -> Self {
        // Years 1970 … 2100.
        let secs = g.below(4_102_444_800) as i64;
        let nanos = if g.coin() { 0 } else { g.below(1_000_000_000) as u32 };
        DateTime::from_timestamp(secs, nanos).unwrap_or_default()
    }
}

impl Arbitrary for NaiveDate {
    fn arbitrary(g: &mut Gen) -> Self {
        let days = g.below(60_000) as i64;
        NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default() + chrono::Duration::days(days)
    }
}

impl Arbitrary for Money {
    fn arbitrary(g: &mut Gen) -> Self {
        let mut money = Money::default();
        for _ in 0..g.below(4) {
            let currency = *g.pick(&["USD", "EUR", "GBP", "JPY", "CAD"]);
            if money.get(currency).is_none() {
                money.0.push((currency.to_owned(), i64::arbitrary(g)));
            }
        }
        money
    }
}

impl Arbitrary for Href {
    fn arbitrary(g: &mut Gen) -> Self {
        let id = g.below(100_000);
        if g.below(4) == 0 {
            Href::path(format!("https://elsewhere.example/v2/things/{id}"))
        } else {
            Href::path(format!("/v2/things/{id}"))
        }
    }
}

impl<T: Arbitrary> Arbitrary for Option<T> {
    fn arbitrary(g: &mut Gen) -> Self {
        if g.below(4) == 0 { None } else { Some(T::arbitrary(g)) }
    }
}

impl<T: Arbitrary> Arbitrary for Box<T> {
    fn arbitrary(g: &mut Gen) -> Self {
        Box::new(T::arbitrary(g))
    }
}

impl<T: Arbitrary> Arbitrary for Vec<T> {
    fn arbitrary(g: &mut Gen) -> Self {
        (0..g.below(3)).map(|_| T::arbitrary(g)).collect()
    }
}
