//! `#[model]`: casts, hidden and guarded fields, fillable profiles (SPEC M1–M4).

mod check;
mod expand;
mod parse;

use darling::Error;
use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemStruct;

use crate::fallback;

pub(crate) use expand::{descriptor, strip_fusion_attrs};

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let Ok(item) = syn::parse2::<ItemStruct>(item.clone()) else {
        return fallback::not_a_struct(item);
    };
    // Every mistake is reported in one run, and what is valid is still generated, so that
    // presenters and tools over the model report their own mistakes too.
    let mut errors = Error::accumulator();
    let Some(mut model) = parse::parse(args, item.clone(), &mut errors) else {
        return fallback::model(errors.finish().err(), item);
    };
    check::check(&mut model, &mut errors);
    let generated = expand::model(&model);
    let errors = errors.finish().err().map(Error::write_errors);
    quote!(#errors #generated)
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::parse_quote;

    use super::{check, parse};

    /// The number of errors reported for `#[model(#args)] #item`, and the valid fields of each
    /// profile.
    fn check(args: proc_macro2::TokenStream, item: syn::ItemStruct) -> (usize, Vec<Vec<String>>) {
        let mut errors = darling::Error::accumulator();
        let profiles = parse::parse(args, item, &mut errors).map(|mut model| {
            check::check(&mut model, &mut errors);
            model
                .profiles
                .iter()
                .map(|profile| profile.fields.iter().map(ToString::to_string).collect())
                .collect()
        });
        (
            errors.finish().err().map_or(0, |error| error.len()),
            profiles.unwrap_or_default(),
        )
    }

    fn invoice() -> syn::ItemStruct {
        parse_quote! {
            pub struct Invoice {
                #[cast("Invoice id")]
                pub id: String,
                #[cast("Total in cents")]
                pub total: i64,
                #[guarded]
                #[hidden]
                pub tenant_id: String,
                pub note: String,
            }
        }
    }

    #[test]
    fn a_valid_model_passes() {
        let args = quote!(fillable(create = [id, total], filter = [total]));
        assert_eq!(
            check(args, invoice()),
            (
                0,
                vec![vec!["id".into(), "total".into()], vec!["total".into()]]
            )
        );
    }

    #[test]
    fn every_mistake_is_reported_and_the_valid_fields_kept() {
        // Guarded, unknown, not cast, listed twice, not a name.
        let args = quote!(fillable(create = [id, tenant_id, totl, note, id, "total"]));
        assert_eq!(check(args, invoice()), (5, vec![vec!["id".into()]]));
    }

    #[test]
    fn a_failed_option_keeps_the_profiles_that_parse() {
        let args = quote!(fillable(create = [id, total], updte = [total]));
        assert_eq!(
            check(args, invoice()),
            (1, vec![vec!["id".into(), "total".into()]])
        );
    }

    #[test]
    fn field_attributes_are_read_where_they_are_written() {
        // An empty label, a flag with arguments, a flag twice.
        let item = parse_quote! {
            pub struct Invoice {
                #[cast("")]
                pub id: String,
                #[hidden(always)]
                #[guarded]
                #[guarded]
                pub secret: String,
            }
        };
        assert_eq!(check(quote!(), item), (3, vec![]));
    }

    #[test]
    fn a_generic_struct_is_not_a_model() {
        let item = parse_quote! {
            pub struct Account<T> {
                #[cast("Account id")]
                pub id: T,
            }
        };
        assert_eq!(check(quote!(), item), (1, vec![]));
    }
}
