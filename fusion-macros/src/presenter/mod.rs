//! `#[presenter]`: the egress view, rules, agent limit, suggestions and UI blocks (SPEC P1–P5).
//!
//! A presenter names its model, but the model's fields were declared in another item. So
//! `#[presenter(Invoice, …)]` expands to a call of `Invoice!`, the descriptor macro that
//! `#[model]` left under the model's name, which calls back `__presenter_for_model!` with the
//! model's field facts. Everything is then checked with full knowledge, spans intact.

pub(crate) mod check;
pub(crate) mod expand;
pub(crate) mod parse;

use darling::Error;
use darling::ast::NestedMeta;
use proc_macro2::TokenStream;
use quote::quote;

use crate::common::meta_list;
use crate::fallback;
use crate::paths::Krate;

/// Stage 1: the attribute hands over to the model's descriptor.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let list = match meta_list(args.clone()) {
        Ok(list) => list,
        Err(error) => return fallback::presenter_without_model(Some(error), &[], item),
    };
    let Some(NestedMeta::Meta(syn::Meta::Path(model))) = list.first() else {
        let error =
            Error::custom("expected the model first: `#[presenter(Invoice, fields(id, total))]`");
        // On what stands first instead, if anything does.
        let error = match list.first() {
            Some(first) => error.with_span(first),
            None => error,
        };
        return fallback::presenter_without_model(Some(error), &list, item);
    };
    let checks = Krate::find_in(&list).checks();
    quote! {
        #model! { [#checks::presenter_for_model] attr { #args } item { #item } }
    }
}

/// Stage 2: the callback, with the model's facts. Every mistake is reported in one run:
/// parsing and checking share one accumulator, and only a presenter that cannot be understood
/// at all stops before the checks.
pub(crate) fn expand_callback(input: TokenStream) -> TokenStream {
    let input: parse::CallbackInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let Some(model) = input.model else {
        // `#[model]` reported why its struct is not a model; nothing to add.
        let list = meta_list(input.attr).unwrap_or_default();
        return fallback::presenter_without_model(None, &list, input.item);
    };
    let mut errors = Error::accumulator();
    let Some(presenter) = parse::parse(input.attr.clone(), input.item.clone(), model, &mut errors)
    else {
        let list = meta_list(input.attr).unwrap_or_default();
        return fallback::presenter_without_model(errors.finish().err(), &list, input.item);
    };
    let checked = check::check(&presenter, &mut errors);
    match (errors.finish(), checked) {
        (Ok(()), Some(checked)) => expand::presenter(&checked),
        (Err(errors), Some(checked)) => fallback::presenter(errors, &checked),
        (result, None) => {
            let list = meta_list(input.attr).unwrap_or_default();
            fallback::presenter_without_model(result.err(), &list, input.item)
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::{check, parse};

    /// The errors reported for a presenter over `Invoice { id, total, secret (hidden), note
    /// (not cast) }`, and the fields that follow the rules.
    fn check(attr: proc_macro2::TokenStream) -> (usize, Vec<String>) {
        let input: parse::CallbackInput = syn::parse2(quote! {
            model { "Invoice" [
                { id 0 "Invoice id" false false }
                { total 1 "Total in cents" false false }
                { secret 2 "Webhook secret" true false }
                { note 3 _ false false }
            ] }
            attr { #attr }
            item { pub struct InvoiceView; }
        })
        .expect("the descriptor's syntax");
        let mut errors = darling::Error::accumulator();
        let model = input.model.expect("a model");
        let presenter =
            parse::parse(input.attr, input.item, model, &mut errors).expect("a presenter");
        let fields = check::check(&presenter, &mut errors)
            .map(|checked| {
                checked
                    .fields
                    .iter()
                    .map(|(listed, _)| listed.ident.to_string())
                    .collect()
            })
            .unwrap_or_default();
        (errors.finish().err().map_or(0, |error| error.len()), fields)
    }

    #[test]
    fn a_valid_presenter_passes() {
        assert_eq!(
            check(quote!(
                Invoice,
                fields(id, total),
                limit = 5,
                max_tokens = 2000
            )),
            (0, vec!["id".into(), "total".into()])
        );
    }

    #[test]
    fn every_mistake_is_reported_and_the_valid_fields_kept() {
        // A zero limit, a zero token budget, a hidden field, a field that is not cast, an
        // unknown one, one listed twice, an element that is not a field, `suggest` without
        // `actions`.
        let attr = quote!(
            Invoice,
            fields(id, secret, note, totl, id, 3),
            limit = 0,
            max_tokens = 0,
            suggest = f
        );
        assert_eq!(check(attr), (8, vec!["id".into()]));
    }

    #[test]
    fn ui_kinds_are_kinds_of_block_listed_for_a_ui_function() {
        let errors = |attr| check(attr).0;
        assert_eq!(
            errors(quote!(
                Invoice,
                fields(id),
                ui = f,
                ui_kinds = ["table", "markdown"]
            )),
            0
        );
        // An unknown kind, and one listed twice.
        assert_eq!(
            errors(quote!(
                Invoice,
                fields(id),
                ui = f,
                ui_kinds = ["tabel", "table", "table"]
            )),
            2
        );
        // No kind listed; kinds listed without a `ui` function.
        assert_eq!(
            errors(quote!(Invoice, fields(id), ui = f, ui_kinds = [])),
            1
        );
        assert_eq!(errors(quote!(Invoice, fields(id), ui_kinds = ["table"])), 1);
    }

    #[test]
    fn a_failed_option_keeps_the_rest() {
        // The typo is the only error: the fields are still read (and checked), and `suggest`
        // is not reported without `actions`, which may be what failed.
        assert_eq!(
            check(quote!(Invoice, fields(id, total), limt = 5, suggest = f)),
            (1, vec!["id".into(), "total".into()])
        );
        assert_eq!(
            check(quote!(Invoice, fields(id, totl), limt = 5)),
            (2, vec!["id".into()])
        );
    }
}
