//! The invoice model: what each column means, what never leaves, what never comes in.

use fusion::model;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where an invoice is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Issued and not paid yet.
    Open,
    /// Paid in full.
    Paid,
    /// Cancelled; it can no longer be paid.
    Voided,
}

impl Status {
    /// The stored text: `open`, `paid` or `voided`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Paid => "paid",
            Status::Voided => "voided",
        }
    }

    /// Parses the stored text.
    pub fn parse(text: &str) -> Option<Status> {
        match text {
            "open" => Some(Status::Open),
            "paid" => Some(Status::Paid),
            "voided" => Some(Status::Voided),
            _ => None,
        }
    }
}

/// An invoice as stored. It has no `Serialize`: it reaches an agent only through a presenter.
#[model(fillable(create = [customer_id, total_cents], update = [total_cents], filter = [status]))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoice {
    /// Primary key, `INV-{n}`.
    #[cast("Invoice id, such as INV-7")]
    pub id: String,
    /// The customer billed.
    #[cast("Customer id, such as C-12")]
    pub customer_id: String,
    /// Amount in cents.
    #[cast("Total in integer cents: divide by 100 for display")]
    pub total_cents: i64,
    /// `open`, `paid` or `voided`.
    #[cast("open, paid or voided")]
    pub status: Status,
    /// The tenant that owns the invoice; derived from the caller's credential, never sent.
    #[guarded]
    #[hidden]
    pub tenant_id: String,
    /// Secret used to sign webhooks for this invoice.
    #[hidden]
    pub webhook_secret: String,
    /// Internal feature flags.
    #[hidden]
    pub internal_flags: String,
}
