//! Where models and hidden values would meet serde, and never do (SPEC M2).
//!
//! `#[model]` implements `Serialize`, `Deserialize` and `JsonSchema` for a model, and this crate
//! implements `Serialize`, the comparisons and `Hash` for [`Hidden<T>`](crate::Hidden), under bounds of
//! [`TheWire`] that never hold. The types then have those traits in name only: no other impl of
//! them can be written (it would conflict), and every attempt to use one is reported with the
//! messages of the traits below instead of advice to derive or implement the trait.
//!
//! Each of those traits has one impl, for a marker that is neither a model nor a hidden value
//! ([`PresenterView`], [`FillableProfile`], [`NotASecret`]). Without it rustc ends the error
//! with "the trait `Serialize` is implemented for `Invoice`" (the impl in name only, found by
//! its similar-impl search on the root obligation, which it runs only when the failed bound's
//! own trait has no impl to show), contradicting the headline; with it, the error ends with
//! "expected `PresenterView`, found `Invoice`", which says the same as the headline.

mod sealed {
    /// Only [`TheWire`](super::TheWire) implements it, for the markers alone: the bounds below
    /// never hold for a model or a hidden value.
    pub trait Never<'a> {}
}

/// The other side of every bound that never holds.
#[doc(hidden)]
#[derive(Debug)]
pub struct TheWire;

/// Never implemented (see [`TheWire`]).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{M}` is a model: its raw value never reaches the wire",
    label = "a model reaches an agent only through a presenter",
    note = "list what an agent may see in `#[presenter({M}, fields(...))]` and return the model through it: `#[tool(..., returns = ThatPresenter)]`",
    note = "a value meant for the wire as it is (a DTO) is a plain type of its own, with no `Hidden` field"
)]
pub trait CarriesRawModel<'a, M>: sealed::Never<'a> {}

/// Never implemented (see [`TheWire`]).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{M}` is a model: it never comes in from an agent",
    label = "a model is never deserialized from arguments",
    note = "take one of its fillable profiles (`fusion::Create<{M}>`, `Update<{M}>` or `Filter<{M}>`) or plain arguments: a profile never contains a guarded field"
)]
pub trait AcceptsRawModel<'a, M>: sealed::Never<'a> {}

/// Never implemented (see [`TheWire`]).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{M}` is a model: it has no JSON schema of its own",
    label = "a model's schema would list its hidden fields",
    note = "a presenter's view and a fillable profile have schemas; use one of them"
)]
pub trait DescribesRawModel<'a, M>: sealed::Never<'a> {}

/// Never implemented: how serializing a hidden value is reported.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a hidden value never reaches the wire: `Hidden<{T}>` cannot be serialized",
    label = "this would serialize a hidden value",
    note = "leave the field out of what is sent; if the value must leave (a deliberate export), read it with `.expose()` and say why in a comment"
)]
pub trait CarriesHiddenValue<'a, T>: sealed::Never<'a> {}

// The markers have no values: a `Hidden<NotASecret>`, whose `Serialize` and comparisons the
// impls below make hold, can never exist, so the bodies that never run stay unreachable.

/// What the wire carries instead of a model: a presenter's view (a marker with no values).
#[doc(hidden)]
#[derive(Debug)]
pub enum PresenterView {}

/// What comes in from an agent instead of a model: a fillable profile (a marker with no values).
#[doc(hidden)]
#[derive(Debug)]
pub enum FillableProfile {}

/// What is serialized, compared, ordered and hashed instead of a hidden value (a marker with no
/// values).
#[doc(hidden)]
#[derive(Debug)]
pub enum NotASecret {}

impl sealed::Never<'_> for TheWire {}
impl CarriesRawModel<'_, PresenterView> for TheWire {}
impl AcceptsRawModel<'_, FillableProfile> for TheWire {}
impl DescribesRawModel<'_, PresenterView> for TheWire {}
impl CarriesHiddenValue<'_, NotASecret> for TheWire {}
impl ComparedOnlyWithMatches<'_, NotASecret> for TheWire {}
impl NeverOrderedUseMatches<'_, NotASecret> for TheWire {}
impl HashedOnlyWithKeyedDigest<'_, NotASecret> for TheWire {}

/// The body of the impls whose bounds never hold: never reached (used by generated code).
#[doc(hidden)]
#[cold]
pub fn unreachable_impl() -> ! {
    unreachable!("an impl whose bounds never hold was called")
}

/// Never implemented: how comparing a hidden value with `==` is reported.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a hidden value is never compared with `==`: `Hidden<{T}>` has no `PartialEq` or `Eq`",
    label = "`==` on a secret answers guesses, and in a time that says how close they came",
    note = "to check input against a secret, call `secret.matches(candidate)` (constant time); to compare two hidden values, `a.matches_hidden(&b)`",
    note = "a type holding a `Hidden` field writes its `PartialEq` by hand, comparing that field with `matches_hidden`"
)]
pub trait ComparedOnlyWithMatches<'a, T>: sealed::Never<'a> {}

/// Never implemented: how ordering a hidden value is reported.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a hidden value is never ordered: `Hidden<{T}>` has no `PartialOrd` or `Ord`",
    label = "`<` on a secret finds it one character at a time",
    note = "to check input against a secret, call `secret.matches(candidate)` (constant time); to sort or key by a hidden value, order by something that is not secret"
)]
pub trait NeverOrderedUseMatches<'a, T>: ComparedOnlyWithMatches<'a, T> {}

/// Never implemented: how hashing a hidden value is reported.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a hidden value is never hashed implicitly: `Hidden<{T}>` has no `Hash`",
    label = "a `Hasher` sees every byte of the secret",
    note = "to store or look up a digest of the secret, call `secret.keyed_digest(&key)` with a `fusion::keyed::DigestKey` (HMAC-SHA-256)",
    note = "a `HashMap`, `HashSet` or `BTreeMap` keyed by a hidden value is keyed by its `keyed_digest` instead"
)]
pub trait HashedOnlyWithKeyedDigest<'a, T>: sealed::Never<'a> {}
