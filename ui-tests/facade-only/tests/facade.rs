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
    // `#[data]` types: read, described and written through the facade, serde's own attributes
    // included.
    let scoped = tester
        .call("crm.count", json!({"scope": {"domain": "elsewhere.org"}}))
        .await;
    assert_eq!(
        scoped.data(),
        &json!({"contacts": 0, "ofDomain": "elsewhere.org"})
    );
    let unknown = tester
        .call("crm.count", json!({"scope": {"domain": "x", "tld": "y"}}))
        .await;
    assert_eq!(unknown.error_code(), Some("VALIDATION_ERROR"));
    let count_tool = tester
        .list_tools()
        .into_iter()
        .find(|tool| tool.name == "crm_count")
        .expect("crm_count is listed");
    let schema = fusion::serde_json::to_string(&*count_tool.input_schema).unwrap();
    assert!(
        schema.contains("Count only addresses at this domain"),
        "the schema of a #[data] type carries its docs: {schema}"
    );
    let listed = tester
        .call("crm.list_contacts", json!({"name": "Ada"}))
        .await;
    assert_eq!(listed.data().as_array().map(Vec::len), Some(1));
}
