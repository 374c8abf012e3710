//! The connector through Fusion's in-memory tester: the real pipeline, no transport.

use __IDENT__::{Notes, builder, principal_of};
use fusion::testing::Tester;
use serde_json::json;

fn tester(notes: &Notes, tenant: &'static str) -> Tester {
    let server = builder(notes.clone()).build().expect("the server builds");
    Tester::new(server).with_context(move |call| {
        call.extensions_mut().insert(principal_of(tenant));
    })
}

#[tokio::test]
async fn a_created_note_is_listed_without_its_hidden_fields() {
    let notes = Notes::default();
    let tester = tester(&notes, "acme");
    let created = tester
        .call("__IDENT__.create_note", json!({"title": "Call Bob", "body": "About the invoice"}))
        .await;
    assert!(!created.is_error(), "{}", created.raw_text());
    assert_eq!(created.data()["title"], "Call Bob");
    let listed = tester.call("__IDENT__.list_notes", json!({})).await;
    assert!(!listed.is_error(), "{}", listed.raw_text());
    let text = listed.raw_text();
    assert!(text.contains("Call Bob"), "{text}");
    // The hidden fields never reach the wire.
    assert!(!text.contains("share_acme"), "{text}");
    assert!(!text.contains("share_token"), "{text}");
    assert!(!text.contains("\"tenant\""), "{text}");
}

#[tokio::test]
async fn a_tenant_never_sees_another_tenants_notes() {
    let notes = Notes::default();
    notes.add("acme", "Acme's plan", "secret plan");
    let other = tester(&notes, "globex");
    let listed = other.call("__IDENT__.list_notes", json!({})).await;
    assert!(!listed.raw_text().contains("Acme's plan"));
    let fetched = other.call("__IDENT__.get_note", json!({"id": "N-1"})).await;
    assert!(fetched.is_error());
}

#[tokio::test]
async fn the_tenant_cannot_be_sent_as_an_argument() {
    let notes = Notes::default();
    let tester = tester(&notes, "acme");
    let refused = tester
        .call("__IDENT__.create_note", json!({"title": "t", "body": "b", "tenant": "globex"}))
        .await;
    assert!(refused.is_error(), "{}", refused.raw_text());
}
