// A struct that `#[model]` cannot make a model of still leaves its descriptor: a presenter over
// it, and functions naming that presenter's item type, report nothing, so the only error is the
// user's own.
use fusion::{Presented, Suggestion, model, presenter};

#[model]
pub struct Account<T> {
    #[cast("Account id")]
    pub id: T,
}

#[presenter(Account, fields(id))]
pub struct AccountView;

pub fn suggest(shown: Presented<'_, AccountViewItem<'_>>) -> Vec<Suggestion> {
    let _ = shown;
    Vec::new()
}

fn main() {}
