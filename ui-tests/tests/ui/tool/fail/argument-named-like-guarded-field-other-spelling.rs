// The name a profile leaves out is reserved under every spelling the server compares as one:
// `ownerId` and `OWNER_ID` are `owner_id`.
#![allow(non_snake_case)]
use fusion::{Create, ToolError, model, tool};

#[model(fillable(create = [name]))]
pub struct Contact {
    #[cast("Contact name")]
    pub name: String,
    #[cast("Owner of the contact")]
    #[guarded]
    pub owner_id: String,
}

/// Creates a contact.
#[tool(mutation, name = "crm.create_contact")]
async fn create_contact(contact: Create<Contact>, ownerId: Option<String>) -> Result<bool, ToolError> {
    let _ = (contact, ownerId);
    Ok(true)
}

fn main() {}
