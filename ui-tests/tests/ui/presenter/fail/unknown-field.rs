// A presenter naming a field that does not exist is reported on the name, with a suggestion.
mod models {
    use fusion::model;

    #[model]
    pub struct Invoice {
        #[cast("Invoice id")]
        pub id: String,
        #[cast("Total in cents")]
        pub total_cents: i64,
    }
}

mod views {
    use crate::models::Invoice;
    use fusion::presenter;

    #[presenter(Invoice, fields(id, totl_cents, colour))]
    pub struct InvoiceView;
}

fn main() {}
