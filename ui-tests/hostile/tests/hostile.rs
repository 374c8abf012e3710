//! The hostile call site compiles and behaves.

use my_fusion::testing::Tester;
use serde_json::json;

#[tokio::test]
async fn hostile_call_site_works() {
    let tester = Tester::new(ui_tests_hostile::server());
    let found = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert!(!found.is_error(), "{}", found.raw_text());
    assert_eq!(
        found.data(),
        &json!({"id": "INV-1", "total_cents": 5, "customer": {"name": "Ada"}})
    );
    assert!(!found.raw_text().contains("whsec_"));
    assert!(!found.raw_text().contains("t_1"));
    let missing = tester
        .call("billing.get_invoice", json!({"id": "INV-404"}))
        .await;
    assert_eq!(missing.error_code(), Some("InvoiceNotFound"));
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 3}),
        )
        .await;
    assert_eq!(created.data(), &json!("C-1:3:None"));
    // What it makes stale is named as the agent calls it: the queries under `billing.**`.
    assert_eq!(
        created.invalidations(),
        ["billing_get_invoice", "billing_list_invoices"]
    );
}
