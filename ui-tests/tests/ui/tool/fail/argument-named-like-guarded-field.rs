// A plain argument cannot bring in, under its own name, a field that the profile leaves out on
// purpose: a guarded one or a hidden one.
use fusion::{Create, Hidden, ToolError, model, tool};

#[model(fillable(create = [name]))]
pub struct Contact {
    #[cast("Contact name")]
    pub name: String,
    #[cast("Owner of the contact")]
    #[guarded]
    pub owner_id: String,
    #[hidden]
    pub password_hash: Hidden<String>,
}

/// Creates a contact.
#[tool(mutation, name = "crm.create_contact")]
async fn create_contact(
    contact: Create<Contact>,
    owner_id: Option<String>,
    password_hash: String,
) -> Result<bool, ToolError> {
    let _ = (contact, owner_id, password_hash);
    Ok(true)
}

fn main() {}
