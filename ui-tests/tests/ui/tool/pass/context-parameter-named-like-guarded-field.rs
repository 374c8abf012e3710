// A parameter taken from the call context may have a guarded field's name: no agent sends it.
use fusion::{CallContext, Create, FromContext, ServerBuilder, ToolError, model, tool};

#[model(fillable(create = [name]))]
pub struct Contact {
    #[cast("Contact name")]
    pub name: String,
    #[cast("Owner of the contact")]
    #[guarded]
    pub owner_id: String,
}

pub struct OwnerId(pub String);

impl FromContext for OwnerId {
    fn from_context(_: &CallContext) -> Result<Self, ToolError> {
        Ok(OwnerId("u_1".into()))
    }
}

/// Creates a contact.
#[tool(mutation, name = "crm.create_contact")]
async fn create_contact(contact: Create<Contact>, owner_id: OwnerId) -> Result<String, ToolError> {
    Ok(format!("{}:{}", contact.name, owner_id.0))
}

fn main() {
    ServerBuilder::new("crm", "1.0.0").tool::<create_contact>().build().unwrap();
}
