// Nested models are presented through their own presenters: one, optional, or many; suggestion
// functions see the nested views, never the models.
use fusion::testing::Tester;
use fusion::{Hidden, Presented, ServerBuilder, Suggestion, ToolError, model, presenter, tool};
use serde_json::json;

#[model]
pub struct Contact {
    #[cast("Contact name")]
    pub name: String,
    #[hidden]
    pub phone: Hidden<String>,
}

#[presenter(Contact, fields(name), rules = ["Names are as the customer wrote them."])]
pub struct ContactView;

#[model]
pub struct Customer {
    #[cast("Customer name")]
    pub name: String,
    #[cast("The main contact, if any")]
    pub main_contact: Option<Contact>,
    #[cast("Every contact")]
    pub contacts: Vec<Contact>,
    #[hidden]
    pub credit_limit: Hidden<i64>,
}

fn suggest(shown: Presented<'_, CustomerViewItem<'_>>) -> Vec<Suggestion> {
    shown
        .items()
        .iter()
        .filter_map(|customer| customer.main_contact.view())
        .map(|contact| Suggestion::new("crm.get_customer", contact.name.clone()))
        .collect()
}

#[presenter(Customer, fields(name, main_contact = ContactView, contacts = ContactView),
            suggest = suggest, actions = ["crm.get_customer"])]
pub struct CustomerView;

/// Gets the customer.
#[tool(query, name = "crm.get_customer", returns = CustomerView)]
async fn get_customer() -> Result<Customer, ToolError> {
    let contact = |name: &str| Contact { name: name.into(), phone: Hidden::new("+1-555".into()) };
    Ok(Customer {
        name: "Acme".into(),
        main_contact: Some(contact("Ada")),
        contacts: vec![contact("Ada"), contact("Grace")],
        credit_limit: Hidden::new(90_000),
    })
}

fn main() {
    let server = ServerBuilder::new("crm", "1.0.0").tool::<get_customer>().build().unwrap();
    let tester = Tester::new(server);
    // The nested presenter's label reaches the agent once, in the listed output schema.
    let listed = json!(tester.list_tools()).to_string();
    assert!(listed.contains("Contact name"), "{listed}");
    let result = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(tester.call("crm.get_customer", json!({})));
    assert_eq!(
        result.data(),
        &json!({
            "name": "Acme",
            "main_contact": {"name": "Ada"},
            "contacts": [{"name": "Ada"}, {"name": "Grace"}],
        })
    );
    assert!(!result.raw_text().contains("555") && !result.raw_text().contains("90000"));
    // ...and is not sent again in every answer's rules.
    assert!(!result.rules().iter().any(|rule| rule.starts_with("main_contact.name")));
    assert_eq!(result.suggestions()[0].reason, "Ada");
}
