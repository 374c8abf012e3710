// `ui_kinds` names kinds of UI block, each once, for a presenter that has a `ui` function.
use fusion::{Presented, UiBlock, model, presenter};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

fn blocks(_: Presented<'_, InvoiceViewItem<'_>>) -> Vec<UiBlock> {
    Vec::new()
}

#[presenter(Invoice, fields(id), ui = blocks, ui_kinds = ["tabel", "chart", "chart"])]
pub struct InvoiceView;

#[presenter(Invoice, fields(id), ui_kinds = ["table"])]
pub struct WithoutUi;

fn main() {}
