//! Request bodies of every resource at every API version and feature set, decoded as the
//! service decodes them (`Routed::decode`: `rebill_xml::from_xml` in request mode, a refusal
//! answered through `reject_decode` and `respond::rejection`), then validated for creation or
//! update as the handlers do (`rebill_models::validate::validate`, whose generated walkers call
//! the hand-written `rules`).
//!
//! Input: byte 0 picks the resource (modulo their number, in schema-name order), byte 1 the
//! version (low four bits, modulo their number), the site features (bits 4–6) and the operation
//! (bit 7: update, else create); the rest is the body.
//!
//! Besides "never panics", a body that decodes must survive its own round trip: written again
//! in request mode and decoded in the same context, it is the same value (the codec's
//! round-trip rule: decoding what was encoded gives the value's projection, and a decoded
//! request is already projected).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rebill_models::validate::{Operation, Rejection, reject_decode, validate};
use rebill_models::{Model, ResourceVisitor, visit_resources};
use rebill_xml::{Mode, WireContext};

/// Decodes, refuses or validates one body as resource `T`.
fn decode<T: Model>(body: &[u8], ctx: &WireContext, op: Operation) {
    match rebill_xml::from_xml::<T>(body, ctx, Mode::Request) {
        Err(e) => {
            let rejection = reject_decode(&e);
            let response = rebill_server::respond::rejection(&rejection, ctx);
            assert!(matches!(response.status().as_u16(), 400 | 422), "a refused body answers 400 or 422");
        }
        Ok(value) => {
            let written = rebill_xml::to_xml(&value, ctx, Mode::Request);
            match rebill_xml::from_xml::<T>(written.as_bytes(), ctx, Mode::Request) {
                Ok(again) => assert_eq!(again, value, "a decoded body written again decodes to itself:\n{written}"),
                Err(e) => panic!("a decoded body written again is refused ({e}):\n{written}"),
            }
            if let Err(errors) = validate(&value, ctx, op) {
                let response = rebill_server::respond::rejection(&Rejection::Invalid(errors), ctx);
                assert_eq!(response.status().as_u16(), 422, "validation errors answer 422");
            }
        }
    }
}

type Decoder = fn(&[u8], &WireContext, Operation);

/// Every resource's decoder, in schema-name order.
fn decoders() -> &'static [(&'static str, Decoder)] {
    struct Collect(Vec<(&'static str, Decoder)>);
    impl ResourceVisitor for Collect {
        fn visit<T: Model>(&mut self, name: &'static str) {
            self.0.push((name, decode::<T>));
        }
    }
    static DECODERS: OnceLock<Vec<(&'static str, Decoder)>> = OnceLock::new();
    DECODERS.get_or_init(|| {
        let mut all = Collect(Vec::new());
        visit_resources(&mut all);
        all.0.sort_by_key(|(name, _)| *name);
        all.0
    })
}

fuzz_target!(|data: &[u8]| {
    let [resource, selector, body @ ..] = data else { return };
    let decoders = decoders();
    let (_, decode) = decoders[usize::from(*resource) % decoders.len()];
    let ctx = rebill_fuzz::wire_context(selector & 0x7f);
    let op = if selector & 0x80 != 0 { Operation::Update } else { Operation::Create };
    decode(body, &ctx, op);
});
