//! The error types that are a description of what failed and, maybe, the error that caused it
//! (a sink's, a store's): one definition, so they read and chain alike.

/// Defines `$name` as such an error, with `new(what)` and `with_source(what, source)`.
macro_rules! described_error {
    ($(#[$attribute:meta])* pub struct $name:ident;) => {
        $(#[$attribute])*
        #[derive(Debug)]
        pub struct $name {
            what: String,
            source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
        }

        impl $name {
            /// A failure described by `what`.
            pub fn new(what: impl Into<String>) -> Self {
                $name {
                    what: what.into(),
                    source: None,
                }
            }

            /// A failure described by `what`, caused by `source`.
            pub fn with_source(
                what: impl Into<String>,
                source: impl std::error::Error + Send + Sync + 'static,
            ) -> Self {
                $name {
                    what: what.into(),
                    source: Some(Box::new(source)),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.what)
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.source
                    .as_deref()
                    .map(|source| source as &(dyn std::error::Error + 'static))
            }
        }
    };
}

pub(crate) use described_error;
