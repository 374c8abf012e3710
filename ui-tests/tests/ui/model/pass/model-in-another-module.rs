// A presenter finds its model through any path that names the model type, in another module.
mod store {
    pub mod models {
        use fusion::model;

        #[model(fillable(filter = [status]))]
        pub struct Invoice {
            #[cast("Invoice id")]
            pub id: String,
            #[cast("open or paid")]
            pub status: String,
            #[hidden]
            pub secret: fusion::Hidden<String>,
        }
    }
}

mod views {
    use fusion::presenter;

    #[presenter(crate::store::models::Invoice, fields(id, status))]
    pub struct InvoiceView;
}

mod other_views {
    use crate::store::models;
    use fusion::presenter;

    #[presenter(models::Invoice, fields(status), item = StatusOnly)]
    pub struct StatusView;
}

fn main() {
    use fusion::Presenter;
    let invoice = store::models::Invoice { id: "INV-1".into(), status: "open".into(), secret: "whsec".into() };
    let item = views::InvoiceView::item(&invoice);
    assert_eq!(serde_json::to_string(&item).unwrap(), r#"{"id":"INV-1","status":"open"}"#);
    let other: other_views::StatusOnly<'_> = other_views::StatusView::item(&invoice);
    assert_eq!(serde_json::to_string(&other).unwrap(), r#"{"status":"open"}"#);
}
