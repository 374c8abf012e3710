//! Sealed request state (SPEC P6, elicitation): what a server hands a client between the rounds
//! of one call (the 2026-07-28 `requestState` of an `input_required` result) and gets back
//! unchanged, or refuses.
//!
//! A token is signed with HMAC-SHA-256 under the newest of the server's [`StateKeys`] and
//! verified under any of them, so keys rotate without breaking calls in flight: add the new key
//! first, remove the old one once its tokens have expired. A token is bound to the tool, to a
//! digest of the call's arguments and to the verified principal, and it expires. A token whose
//! bytes changed, that expired, that was signed by a removed key, or that is replayed for
//! another tool, other arguments or another principal is refused with its own
//! [`StateError`].
//!
//! The state is **signed, not encrypted**: the client can read it. Put references in it (an
//! invoice id, a step), never a secret.
//!
//! ```
//! use std::time::Duration;
//! use fusion_runtime::request_state::{Binding, StateKey, StateKeys};
//! use serde_json::json;
//!
//! let keys = StateKeys::new([StateKey::new("2026-12", [7u8; 32]).unwrap()]);
//! let arguments = json!({"id": "INV-7"});
//! let binding = Binding::new("billing.void_invoice", &arguments, Some("user:ann"));
//! let token = keys.seal(&binding, &json!({"step": "confirm"}), Duration::from_secs(300));
//! assert_eq!(keys.open(&token, &binding).unwrap(), json!({"step": "confirm"}));
//! let other = Binding::new("billing.void_invoice", &arguments, Some("user:bob"));
//! assert!(keys.open(&token, &other).is_err());
//! ```

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::keyed::{bytes_match, hmac_sha256};

/// The shortest secret a key may have, in bytes.
pub const MIN_SECRET_LEN: usize = 32;

const VERSION: &str = "fs1";

/// One signing key: an id (sent in the clear, so that the right key is found) and a secret of
/// at least [`MIN_SECRET_LEN`] random bytes.
#[derive(Clone)]
pub struct StateKey {
    id: String,
    secret: Vec<u8>,
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateKey")
            .field("id", &self.id)
            .field("secret", &"[hidden]")
            .finish()
    }
}

impl StateKey {
    /// A key; refused when the secret is shorter than [`MIN_SECRET_LEN`] or the id is empty or
    /// holds a `.`.
    pub fn new(id: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<StateKey, String> {
        let id = id.into();
        let secret = secret.as_ref().to_vec();
        if id.is_empty() || id.contains('.') {
            return Err(format!(
                "a state key id is non-empty and has no `.`: `{id}`"
            ));
        }
        if secret.len() < MIN_SECRET_LEN {
            return Err(format!(
                "state key `{id}`: a secret has at least {MIN_SECRET_LEN} bytes, this one {}",
                secret.len()
            ));
        }
        Ok(StateKey { id, secret })
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The server's keys, newest first: the first signs, all verify.
#[derive(Debug, Clone)]
pub struct StateKeys {
    keys: Vec<StateKey>,
}

/// What a token is bound to: the tool, the call's arguments (as a digest) and the principal.
#[derive(Debug, Clone)]
pub struct Binding {
    tool: String,
    arguments: String,
    principal: Option<String>,
}

impl Binding {
    /// The binding of a call of `tool` with `arguments` by `principal` (its subject).
    pub fn new(tool: &str, arguments: &Value, principal: Option<&str>) -> Binding {
        Binding {
            tool: tool.to_owned(),
            arguments: crate::audit::arguments_digest(arguments),
            principal: principal.map(str::to_owned),
        }
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// Not a token of this server's format.
    Malformed,
    /// Signed by a key this server does not hold (removed, or never its own).
    UnknownKey(String),
    /// Its bytes are not the ones that were signed.
    Tampered,
    /// Its time ran out.
    Expired,
    /// Issued for another tool.
    OtherTool,
    /// Issued for other arguments.
    OtherArguments,
    /// Issued to another principal.
    OtherPrincipal,
}

impl StateError {
    /// The error code an agent is told.
    pub fn code(&self) -> &'static str {
        match self {
            StateError::Malformed | StateError::Tampered => "REQUEST_STATE_INVALID",
            StateError::UnknownKey(_) => "REQUEST_STATE_UNKNOWN_KEY",
            StateError::Expired => "REQUEST_STATE_EXPIRED",
            StateError::OtherTool | StateError::OtherArguments | StateError::OtherPrincipal => {
                "REQUEST_STATE_MISMATCH"
            }
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Malformed => f.write_str("the request state is not one this server issued"),
            StateError::UnknownKey(id) => write!(
                f,
                "the request state was signed with key `{id}`, which this server no longer holds"
            ),
            StateError::Tampered => f.write_str("the request state was altered"),
            StateError::Expired => f.write_str("the request state has expired"),
            StateError::OtherTool => {
                f.write_str("the request state was issued for another tool, prompt or resource")
            }
            StateError::OtherArguments => {
                f.write_str("the request state was issued for other arguments")
            }
            StateError::OtherPrincipal => {
                f.write_str("the request state was issued to another caller")
            }
        }
    }
}

impl From<StateError> for ToolError {
    fn from(error: StateError) -> ToolError {
        let recovery = match error {
            StateError::Expired | StateError::UnknownKey(_) => {
                "Send the request again without requestState to start over."
            }
            _ => {
                "Send back the requestState exactly as the server returned it, with the same \
                  arguments, or call again without it to start over."
            }
        };
        ToolError::new(
            error.code(),
            format!("{}.", capitalized(&error.to_string())),
        )
        .with_recovery(recovery)
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

impl StateKeys {
    /// One key of 32 random bytes (two UUID v4s: 244 random bits) under the id `random`, for
    /// one process only: states it sealed are refused by any other process.
    pub fn random() -> StateKeys {
        let mut secret = Vec::with_capacity(32);
        secret.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        secret.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        let id = format!("random-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        StateKeys::new([StateKey::new(id, secret).expect("a 32-byte secret and a plain id")])
    }

    /// The keys, newest (the signing key) first. At least one.
    pub fn new(keys: impl IntoIterator<Item = StateKey>) -> StateKeys {
        let keys: Vec<StateKey> = keys.into_iter().collect();
        assert!(!keys.is_empty(), "StateKeys needs at least one key");
        StateKeys { keys }
    }

    /// Seals `data` for `binding`, valid for `ttl` from now.
    pub fn seal(&self, binding: &Binding, data: &Value, ttl: Duration) -> String {
        self.seal_at(binding, data, SystemTime::now() + ttl)
    }

    /// Seals `data` for `binding`, valid until `expires`.
    pub fn seal_at(&self, binding: &Binding, data: &Value, expires: SystemTime) -> String {
        let key = &self.keys[0];
        let payload = json!({
            "exp": unix_ms(expires),
            "tool": binding.tool,
            "args": binding.arguments,
            "sub": binding.principal,
            "data": data,
        });
        let body = format!(
            "{VERSION}.{}.{}",
            key.id,
            URL_SAFE_NO_PAD.encode(payload.to_string())
        );
        let mac = hmac_sha256(&key.secret, body.as_bytes());
        format!("{body}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// Opens `token` for `binding`: its data, or why it is refused.
    pub fn open(&self, token: &str, binding: &Binding) -> Result<Value, StateError> {
        self.open_at(token, binding, SystemTime::now())
    }

    /// Opens `token` for `binding` as of `now`.
    pub fn open_at(
        &self,
        token: &str,
        binding: &Binding,
        now: SystemTime,
    ) -> Result<Value, StateError> {
        let (body, mac) = token.rsplit_once('.').ok_or(StateError::Malformed)?;
        let mut parts = body.splitn(3, '.');
        let (Some(VERSION), Some(id), Some(payload)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(StateError::Malformed);
        };
        let key = self
            .keys
            .iter()
            .find(|key| key.id == id)
            .ok_or_else(|| StateError::UnknownKey(id.to_owned()))?;
        let mac = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| StateError::Tampered)?;
        if !bytes_match(&mac, &hmac_sha256(&key.secret, body.as_bytes())) {
            return Err(StateError::Tampered);
        }
        // Signed by this server from here on.
        let payload: Value = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or(StateError::Malformed)?;
        let expires = payload["exp"].as_u64().ok_or(StateError::Malformed)?;
        if unix_ms(now) >= expires {
            return Err(StateError::Expired);
        }
        if payload["tool"] != binding.tool.as_str() {
            return Err(StateError::OtherTool);
        }
        if payload["args"] != binding.arguments.as_str() {
            return Err(StateError::OtherArguments);
        }
        if payload["sub"].as_str() != binding.principal.as_deref() {
            return Err(StateError::OtherPrincipal);
        }
        Ok(payload["data"].clone())
    }
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, byte: u8) -> StateKey {
        StateKey::new(id, [byte; 32]).unwrap()
    }

    fn binding() -> Binding {
        Binding::new(
            "billing.void_invoice",
            &json!({"id": "INV-7"}),
            Some("user:ann"),
        )
    }

    fn sealed(keys: &StateKeys) -> String {
        keys.seal(
            &binding(),
            &json!({"confirm": "INV-7"}),
            Duration::from_secs(60),
        )
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than a block is hashed first.
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        let hex: String = mac.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(
            hex,
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_sealed_state_opens_for_its_binding() {
        let keys = StateKeys::new([key("k1", 1)]);
        let token = sealed(&keys);
        assert_eq!(
            keys.open(&token, &binding()),
            Ok(json!({"confirm": "INV-7"}))
        );
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let keys = StateKeys::new([key("k1", 1)]);
        let token = sealed(&keys);
        for index in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[index] ^= 0x01;
            let Ok(tampered) = String::from_utf8(bytes) else {
                continue;
            };
            let error = keys.open(&tampered, &binding()).unwrap_err();
            assert!(
                matches!(
                    error,
                    StateError::Tampered | StateError::Malformed | StateError::UnknownKey(_)
                ),
                "byte {index}: {error:?}"
            );
        }
    }

    #[test]
    fn an_expired_state_is_refused() {
        let keys = StateKeys::new([key("k1", 1)]);
        let expires = SystemTime::now() + Duration::from_secs(60);
        let token = keys.seal_at(&binding(), &json!(1), expires);
        assert!(
            keys.open_at(&token, &binding(), expires - Duration::from_millis(1))
                .is_ok()
        );
        assert_eq!(
            keys.open_at(&token, &binding(), expires),
            Err(StateError::Expired)
        );
    }

    #[test]
    fn a_state_is_bound_to_its_tool_arguments_and_principal() {
        let keys = StateKeys::new([key("k1", 1)]);
        let token = sealed(&keys);
        let arguments = json!({"id": "INV-7"});
        let cases = [
            (
                Binding::new("billing.delete_invoice", &arguments, Some("user:ann")),
                StateError::OtherTool,
            ),
            (
                Binding::new(
                    "billing.void_invoice",
                    &json!({"id": "INV-8"}),
                    Some("user:ann"),
                ),
                StateError::OtherArguments,
            ),
            (
                Binding::new("billing.void_invoice", &arguments, Some("user:bob")),
                StateError::OtherPrincipal,
            ),
            (
                Binding::new("billing.void_invoice", &arguments, None),
                StateError::OtherPrincipal,
            ),
        ];
        for (binding, expected) in cases {
            assert_eq!(keys.open(&token, &binding), Err(expected));
        }
    }

    #[test]
    fn keys_rotate_newest_signs_all_verify_removed_refused() {
        let old = StateKeys::new([key("k1", 1)]);
        let token = sealed(&old);
        // k2 added: it signs, k1 still verifies.
        let rotated = StateKeys::new([key("k2", 2), key("k1", 1)]);
        assert!(rotated.open(&token, &binding()).is_ok());
        let new_token = sealed(&rotated);
        assert!(new_token.starts_with("fs1.k2."));
        assert_eq!(
            old.open(&new_token, &binding()),
            Err(StateError::UnknownKey("k2".into()))
        );
        // k1 removed: its tokens are refused.
        let removed = StateKeys::new([key("k2", 2)]);
        assert_eq!(
            removed.open(&token, &binding()),
            Err(StateError::UnknownKey("k1".into()))
        );
        assert!(removed.open(&new_token, &binding()).is_ok());
        // A key of the same id with another secret does not verify.
        let impostor = StateKeys::new([key("k1", 9)]);
        assert_eq!(impostor.open(&token, &binding()), Err(StateError::Tampered));
    }

    #[test]
    fn short_secrets_and_bad_ids_are_refused_and_secrets_never_debug_printed() {
        assert!(StateKey::new("k", [0u8; 31]).is_err());
        assert!(StateKey::new("a.b", [0u8; 32]).is_err());
        assert!(StateKey::new("", [0u8; 32]).is_err());
        assert!(!format!("{:?}", key("k1", 0x41)).contains("65"));
    }

    #[test]
    fn refusals_are_tool_errors_with_specific_codes() {
        let error: ToolError = StateError::Expired.into();
        assert_eq!(error.code(), "REQUEST_STATE_EXPIRED");
        let error: ToolError = StateError::OtherPrincipal.into();
        assert_eq!(error.code(), "REQUEST_STATE_MISMATCH");
        let error: ToolError = StateError::Tampered.into();
        assert_eq!(error.code(), "REQUEST_STATE_INVALID");
    }
}
