//! What `cargo fusion bundle` built, reported by the running server: the content hash of the
//! sources and the digest of the verified `fusion.lock`, in the `_meta` of the `initialize`
//! answer (2025-11-25) and of `server/discover` (2026-07-28), under `dev.fusion/bundle`.

use rmcp::model::MetaObject;
use serde_json::json;

/// The `_meta` key the bundle is reported under.
pub const BUNDLE_META_KEY: &str = "dev.fusion/bundle";

/// A bundle's identity: its content hash (`sha256:…`) and its lockfile's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    hash: String,
    lock: Option<String>,
}

impl Bundle {
    /// A bundle with this content hash and lockfile digest.
    pub fn new(hash: impl Into<String>, lock: Option<String>) -> Self {
        Bundle {
            hash: hash.into(),
            lock,
        }
    }

    /// The bundle this binary was built as: `FUSION_BUNDLE_HASH` and `FUSION_BUNDLE_LOCK`,
    /// which `cargo fusion bundle` sets for its build (the same values `--version` prints);
    /// `None` for any other build.
    pub fn built() -> Option<Bundle> {
        option_env!("FUSION_BUNDLE_HASH").map(|hash| Bundle {
            hash: hash.to_owned(),
            lock: option_env!("FUSION_BUNDLE_LOCK").map(str::to_owned),
        })
    }

    /// The content hash.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The lockfile's digest, when the bundle had one.
    pub fn lock(&self) -> Option<&str> {
        self.lock.as_deref()
    }

    /// Adds `dev.fusion/bundle: {"hash", "lock"}` to `meta`.
    pub(crate) fn add_to(&self, meta: &mut MetaObject) {
        meta.0.insert(
            BUNDLE_META_KEY.to_owned(),
            json!({ "hash": self.hash, "lock": self.lock }),
        );
    }
}
