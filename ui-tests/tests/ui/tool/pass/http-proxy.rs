//! A proxy tool next to a hostile scope: the generated body names nothing the user's scope
//! could shadow.
#![allow(dead_code)]

use fusion::{Create, Hidden, HttpUpstream, ServerBuilder, ToolError, model, presenter, tool};

type Result<T> = core::result::Result<T, ()>;
struct Some;
struct Option;

#[model(upstream, fillable(create = [name, password]))]
pub struct User {
    #[cast("User id")]
    pub id: u64,
    #[cast("Name")]
    pub name: String,
    #[cast("Password")]
    #[hidden]
    pub password: Hidden<String>,
}

#[presenter(User, fields(id, name))]
pub struct UserView;

/// Reads a user.
#[tool(query, name = "users.get", http = "GET /users/{id}", returns = UserView)]
pub async fn get_user(id: u64) -> core::result::Result<User, ToolError>;

/// Reads a user's card, as a file.
#[tool(query, name = "users.card", http = "GET /users/{id}/card.{format}", returns = UserView)]
pub async fn user_card(id: u64, format: String) -> core::result::Result<User, ToolError>;

/// Creates a user.
#[tool(mutation, name = "users.create", http = "POST /users", returns = UserView)]
pub async fn create_user(user: Create<User>) -> core::result::Result<User, ToolError>;

fn main() {
    let upstream = HttpUpstream::builder("http://127.0.0.1:9").build().unwrap();
    let server = ServerBuilder::new("users", "1.0.0")
        .upstream(upstream)
        .tool::<get_user>()
        .tool::<user_card>()
        .tool::<create_user>()
        .build()
        .unwrap();
    assert_eq!(server.tools().count(), 3);
}
