use super::*;

#[test]
fn actions_round_trip() {
    for a in CreditPaymentAction::ALL {
        assert_eq!(CreditPaymentAction::parse(a.as_str()), Some(a));
    }
    assert_eq!(CreditPaymentAction::parse("gift"), None);
}
