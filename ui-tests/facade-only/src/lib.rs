//! A small connector written against `fusion` alone: a model with hidden and guarded fields,
//! fillable profiles, a presenter, tools taking profiles and plain parameters, a domain error,
//! and a plain result type derived through the facade's re-exports.

use std::sync::Mutex;

use fusion::{
    Create, Filter, Hidden, Server, ServerBuilder, State, ToolError, model, presenter, tool,
};

/// A contact in a CRM.
#[model(fillable(create = [name, email], filter = [name]))]
#[derive(Clone)]
pub struct Contact {
    /// Primary key.
    #[cast("Contact id, such as C-1")]
    pub id: String,
    /// Full name.
    #[cast("Full name")]
    pub name: String,
    /// E-mail address.
    #[cast("E-mail address")]
    pub email: String,
    /// Who owns the contact; derived from the caller, never sent by an agent.
    #[guarded]
    #[hidden]
    pub owner: Hidden<String>,
}

/// What an agent sees of a contact.
#[presenter(Contact, fields(id, name, email), limit = 10, rules = ["Names are as written."])]
#[derive(Debug)]
pub struct ContactView;

/// Domain errors.
#[derive(Debug, fusion::ToolError)]
pub enum CrmError {
    /// No such contact.
    #[tool_error(code = "ContactNotFound", message = "Contact {0} does not exist.",
                 actions = ["crm.list_contacts"])]
    NotFound(String),
}

/// Counts, derived through the facade by `#[data]`: no serde or schemars here, not even a
/// `crate = …` line.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
pub struct Count {
    /// How many contacts there are.
    pub contacts: usize,
    /// Set when the count was asked for a domain, in camelCase as serde's own attribute says.
    #[serde(skip_serializing_if = "Option::is_none", rename = "ofDomain")]
    pub of_domain: Option<String>,
}

/// Which contacts to count: an argument type of the connector's own, read with serde and
/// described with schemars, both through `fusion`.
#[fusion::data]
#[derive(Debug)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// Count only addresses at this domain (`example.com`).
    pub domain: String,
}

/// The contacts.
#[derive(Debug, Default)]
pub struct Book(pub Mutex<Vec<Contact>>);

/// Creates a contact.
#[tool(mutation, name = "crm.create_contact", returns = ContactView, destructive = false)]
async fn create_contact(
    book: State<Book>,
    contact: Create<Contact>,
    /// Mark the contact as a favourite.
    favourite: Option<bool>,
) -> Result<Contact, ToolError> {
    let mut contacts = book
        .0
        .lock()
        .map_err(|_| ToolError::internal_message("poisoned"))?;
    let created = Contact {
        id: format!("C-{}", contacts.len() + 1),
        name: contact.name,
        email: contact.email,
        owner: Hidden::new(format!("owner-{}", favourite.unwrap_or(false))),
    };
    contacts.push(created.clone());
    Ok(created)
}

/// Gets one contact.
#[tool(query, name = "crm.get_contact", returns = ContactView)]
async fn get_contact(book: State<Book>, id: String) -> Result<Contact, CrmError> {
    let contacts = book
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    contacts
        .iter()
        .find(|contact| contact.id == id)
        .cloned()
        .ok_or(CrmError::NotFound(id))
}

/// Lists contacts, optionally by name.
#[tool(query, name = "crm.list_contacts", returns = ContactView)]
async fn list_contacts(
    book: State<Book>,
    filter: Filter<Contact>,
) -> Result<Vec<Contact>, ToolError> {
    let contacts = book
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok(contacts
        .iter()
        .filter(|contact| {
            filter
                .name
                .as_ref()
                .is_none_or(|name| *name == contact.name)
        })
        .cloned()
        .collect())
}

/// Counts the contacts, or those of one domain.
#[tool(query, name = "crm.count")]
async fn count(book: State<Book>, scope: Option<Scope>) -> Result<Count, ToolError> {
    let contacts = book
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let domain = scope.map(|scope| scope.domain);
    Ok(Count {
        contacts: contacts
            .iter()
            .filter(|contact| {
                domain
                    .as_ref()
                    .is_none_or(|domain| contact.email.ends_with(&format!("@{domain}")))
            })
            .count(),
        of_domain: domain,
    })
}

/// The connector.
pub fn server() -> Server {
    ServerBuilder::new("crm", "1.0.0")
        .state(Book::default())
        .tool::<create_contact>()
        .tool::<get_contact>()
        .tool::<list_contacts>()
        .tool::<count>()
        .build()
        .expect("the connector builds")
}
