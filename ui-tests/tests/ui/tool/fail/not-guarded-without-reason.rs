// Stating that an argument is not the guarded field it is named like takes a reason, for the
// reviewer who reads it in the lockfile.
use fusion::{ToolError, tool};

/// Transfers a contact.
#[tool(mutation, name = "crm.transfer")]
async fn transfer(
    #[not_guarded] owner_id: String,
    #[not_guarded("")] new_owner_id: String,
    #[not_guarded("the target")]
    #[not_guarded("twice")]
    target_id: String,
) -> Result<bool, ToolError> {
    let _ = (owner_id, new_owner_id, target_id);
    Ok(true)
}

fn main() {}
