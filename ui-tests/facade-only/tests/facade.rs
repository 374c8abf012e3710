//! The connector built on `fusion` alone runs: profiles in, presenters out, hidden values kept.

use fusion::serde_json::json;
use fusion::testing::Tester;

#[tokio::test]
async fn a_connector_on_fusion_alone_works() {
    let tester = Tester::new(ui_tests_facade_only::server());
    let created = tester
        .call(
            "crm.create_contact",
            json!({"name": "Ada", "email": "ada@example.com", "favourite": true}),
        )
        .await;
    assert_eq!(
        created.data(),
        &json!({"id": "C-1", "name": "Ada", "email": "ada@example.com"})
    );
    assert!(!created.raw_text().contains("owner-"));
    let guarded = tester
        .call(
            "crm.create_contact",
            json!({"name": "Eve", "email": "eve@example.com", "owner": "me"}),
        )
        .await;
    assert_eq!(guarded.error_code(), Some("VALIDATION_ERROR"));
    let missing = tester.call("crm.get_contact", json!({"id": "C-9"})).await;
    assert_eq!(missing.error_code(), Some("ContactNotFound"));
    let count = tester.call("crm.count", json!({})).await;
    assert_eq!(count.data(), &json!({"contacts": 1}));
    let listed = tester
        .call("crm.list_contacts", json!({"name": "Ada"}))
        .await;
    assert_eq!(listed.data().as_array().map(Vec::len), Some(1));
}
