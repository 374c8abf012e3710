//! The `oauth` feature over real HTTP on 127.0.0.1: an issuer of our own keys (metadata, JWKS
//! and introspection, each request counted), a Fusion server that verifies its tokens, and
//! every hostile token we know of. Each refused token gets 401 without internal text, and the
//! mutation's handler never runs.
#![cfg(feature = "oauth")]

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fusion_runtime::scopes::ScopeRules;
use fusion_runtime::serve::oauth::{ClaimNames, IntrospectionVerifier, JwtVerifier};
use fusion_runtime::serve::{HttpOptions, Mcp, ProtectedResource, TokenVerifier};
use fusion_runtime::{CallContext, Server, ServerBuilder, ToolError, ToolSpec};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use support::{Raw, Served, within};

const RESOURCE: &str = "http://mcp.test/mcp";
const METADATA: &str = "http://mcp.test/.well-known/oauth-protected-resource/mcp";
const ISSUER_KEY: &[u8] = include_bytes!("fixtures/oauth/issuer.key.pem");
const ISSUER_PUBLIC: &[u8] = include_bytes!("fixtures/oauth/issuer.pub.pem");
const OTHER_KEY: &[u8] = include_bytes!("fixtures/oauth/other.key.pem");

// ---------------------------------------------------------------------------------------------
// The issuer

#[derive(Default)]
struct IssuerState {
    url: String,
    jwks: Mutex<Value>,
    jwks_fetches: AtomicU64,
    introspections: AtomicU64,
    /// Opaque token → its introspection answer.
    opaque: Mutex<HashMap<String, Value>>,
}

struct Issuer {
    state: Arc<IssuerState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn jwk(pem: &[u8], kid: &str) -> Jwk {
    let key = EncodingKey::from_rsa_pem(pem).expect("a test key");
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::RS256).expect("its JWK");
    jwk.common.key_id = Some(kid.into());
    jwk
}

impl Issuer {
    async fn start() -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = JwkSet {
            keys: vec![jwk(ISSUER_KEY, "k1")],
        };
        let state = Arc::new(IssuerState {
            url,
            jwks: Mutex::new(serde_json::to_value(jwks).unwrap()),
            ..IssuerState::default()
        });
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                get(|State(state): State<Arc<IssuerState>>| async move {
                    json_body(json!({
                        "issuer": state.url,
                        "jwks_uri": format!("{}/jwks", state.url),
                        "introspection_endpoint": format!("{}/introspect", state.url),
                    }))
                }),
            )
            .route(
                "/jwks",
                get(|State(state): State<Arc<IssuerState>>| async move {
                    state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
                    json_body(state.jwks.lock().unwrap().clone())
                }),
            )
            .route("/introspect", post(introspect))
            .with_state(Arc::clone(&state));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Issuer { state, task }
    }

    fn url(&self) -> &str {
        &self.state.url
    }

    fn jwks_fetches(&self) -> u64 {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }
}

/// RFC 7662 for the client `fusion` with secret `s3cret`.
async fn introspect(
    State(state): State<Arc<IssuerState>>,
    headers: HeaderMap,
    body: String,
) -> (axum::http::StatusCode, Json) {
    state.introspections.fetch_add(1, Ordering::SeqCst);
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("fusion:s3cret")
    );
    if headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        != Some(&expected)
    {
        return (axum::http::StatusCode::UNAUTHORIZED, json_body(json!({})));
    }
    let token = body
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .unwrap_or_default()
        .to_owned();
    let answer = state
        .opaque
        .lock()
        .unwrap()
        .get(&token)
        .cloned()
        .unwrap_or_else(|| json!({"active": false}));
    (axum::http::StatusCode::OK, json_body(answer))
}

type Json = ([(&'static str, &'static str); 1], String);

fn json_body(value: Value) -> Json {
    ([("content-type", "application/json")], value.to_string())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims of a good token for `RESOURCE` from `issuer`, for `edit` to spoil.
fn claims(issuer: &str, scope: &str) -> Value {
    json!({
        "iss": issuer, "aud": RESOURCE, "sub": "alice", "org": "acme",
        "scope": scope, "iat": now(), "exp": now() + 300,
    })
}

fn sign(claims: &Value, kid: &str, pem: &[u8]) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_rsa_pem(pem).unwrap()).unwrap()
}

fn good(issuer: &Issuer, scope: &str) -> String {
    sign(&claims(issuer.url(), scope), "k1", ISSUER_KEY)
}

fn unsigned(header: Value, claims: &Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

// ---------------------------------------------------------------------------------------------
// The server

#[derive(Deserialize, JsonSchema)]
struct Charge {
    cents: u64,
}

#[derive(Serialize, JsonSchema)]
struct Balance {
    cents: u64,
}

/// `billing.get_balance` (a query: `billing:read`) and `billing.charge` (a mutation:
/// `billing:write`), whose handler adds to `charged`.
fn billing(charged: Arc<AtomicU64>) -> Server {
    let read = Arc::clone(&charged);
    ServerBuilder::new("billing", "1.0.0")
        .tool_spec(
            ToolSpec::query("billing.get_balance", "The balance.").handler(
                move |_: CallContext, _: serde_json::Map<String, Value>| {
                    let cents = read.load(Ordering::SeqCst);
                    async move { Ok::<_, ToolError>(Balance { cents }) }
                },
            ),
        )
        .tool_spec(
            ToolSpec::mutation("billing.charge", "Charges the card.").handler(
                move |_: CallContext, args: Charge| {
                    let cents = charged.fetch_add(args.cents, Ordering::SeqCst) + args.cents;
                    async move { Ok::<_, ToolError>(Balance { cents }) }
                },
            ),
        )
        .access(ScopeRules::new())
        .build()
        .expect("the billing server builds")
}

struct Setup {
    issuer: Issuer,
    served: Served,
    charged: Arc<AtomicU64>,
}

async fn jwt_verifier(issuer: &Issuer) -> JwtVerifier {
    JwtVerifier::builder(issuer.url(), RESOURCE)
        .claims(ClaimNames::default().tenant("org"))
        .discover()
        .await
        .expect("the issuer's metadata and keys")
}

async fn setup_jwt() -> Setup {
    let issuer = Issuer::start().await;
    let verifier = jwt_verifier(&issuer).await;
    let charged = Arc::new(AtomicU64::new(0));
    let server = billing(Arc::clone(&charged));
    let resource =
        ProtectedResource::new(RESOURCE, issuer.url()).scopes(ScopeRules::new().supported(&server));
    let options = HttpOptions::default()
        .auth(verifier)
        .protected_resource(resource);
    let served = Served::start(Mcp::new(server), options).await;
    Setup {
        issuer,
        served,
        charged,
    }
}

async fn charge(setup: &Setup, token: &str) -> support::RawResponse {
    let mut raw = Raw::connect(setup.served.address).await.unwrap();
    raw.stateless_call(Some(token), "billing_charge", json!({"cents": 500}))
        .await
        .unwrap()
}

/// A 401 with the challenge pointing at the metadata, and nothing of why.
fn assert_refused(response: &support::RawResponse, what: &str) {
    assert_eq!(response.status, 401, "{what}: {}", response.text());
    let challenge = response.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer ")
            && challenge.contains(&format!("resource_metadata=\"{METADATA}\""))
            && challenge.contains("error=\"invalid_token\""),
        "{what}: {challenge}"
    );
    assert_eq!(
        response.text(),
        "Unauthorized: the bearer token is not valid",
        "{what}"
    );
}

// ---------------------------------------------------------------------------------------------
// The tests

#[tokio::test]
async fn a_token_for_this_resource_calls_what_its_scopes_allow() {
    within(async {
        let setup = setup_jwt().await;
        let reader = good(&setup.issuer, "billing:read");
        let writer = good(&setup.issuer, "billing:read billing:write");

        let mut raw = Raw::connect(setup.served.address).await.unwrap();
        let session = raw.open_session(Some(&reader)).await.unwrap();
        let id = session.header("mcp-session-id").unwrap().to_owned();
        let listed = raw
            .post(
                Some(&reader),
                Some(&id),
                &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            )
            .await
            .unwrap()
            .message();
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["billing_get_balance"],
            "a reader is not shown the mutation"
        );

        // A stateless call names its tool in `Mcp-Name`: refused at the HTTP level with the
        // step-up challenge (403 insufficient_scope, the scope to ask for, the metadata), before
        // the body is read.
        let refused = charge(&setup, &reader).await;
        assert_eq!(refused.status, 403, "{}", refused.text());
        assert_eq!(
            refused.header("www-authenticate").unwrap_or_default(),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"billing:write\", \
                 resource_metadata=\"{METADATA}\", \
                 error_description=\"the token lacks a scope this tool needs\""
            )
        );
        assert_eq!(
            refused.text(),
            "Forbidden: the token lacks the scope `billing:write`"
        );

        // In a 2025-11-25 session the tool is named only in the body: the pipeline refuses it
        // before its arguments are read, naming the same scope.
        let in_session = raw
            .post(
                Some(&reader),
                Some(&id),
                &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "billing_charge", "arguments": {"cents": 500}}}),
            )
            .await
            .unwrap();
        assert_eq!(in_session.status, 200, "{}", in_session.text());
        let text = in_session.text();
        assert!(
            text.contains("billing:write") && text.contains("insufficient_scope"),
            "{text}"
        );
        assert_eq!(
            in_session.message()["result"]["isError"],
            json!(true),
            "{text}"
        );
        assert_eq!(
            setup.charged.load(Ordering::SeqCst),
            0,
            "the handler did not run"
        );

        let accepted = charge(&setup, &writer).await;
        assert_eq!(accepted.status, 200, "{}", accepted.text());
        assert_eq!(setup.charged.load(Ordering::SeqCst), 500);
        // One fetch at start-up: known keys cost no round trip per call.
        assert_eq!(setup.issuer.jwks_fetches(), 1);
    })
    .await;
}

#[tokio::test]
async fn every_hostile_token_is_refused_with_401_and_nothing_runs() {
    within(async {
        let setup = setup_jwt().await;
        let issuer = setup.issuer.url().to_owned();
        let spoiled = |edit: fn(&mut Value)| {
            let mut claims = claims(&issuer, "billing:read billing:write");
            edit(&mut claims);
            sign(&claims, "k1", ISSUER_KEY)
        };
        let full = claims(&issuer, "billing:read billing:write");
        let cases: Vec<(&str, String)> = vec![
            ("no token at all", String::new()),
            ("not a JWT", "opaque-garbage".into()),
            (
                "expired beyond the skew",
                spoiled(|c| c["exp"] = json!(now() - 120)),
            ),
            ("not yet valid", spoiled(|c| c["nbf"] = json!(now() + 600))),
            (
                "without exp",
                spoiled(|c| {
                    c.as_object_mut().unwrap().remove("exp");
                }),
            ),
            (
                "wrong audience",
                spoiled(|c| c["aud"] = json!("some-client-id")),
            ),
            (
                "a token for another resource",
                spoiled(|c| c["aud"] = json!("http://other.test/mcp")),
            ),
            (
                "without audience",
                spoiled(|c| {
                    c.as_object_mut().unwrap().remove("aud");
                }),
            ),
            (
                "wrong issuer",
                spoiled(|c| c["iss"] = json!("http://evil.test")),
            ),
            (
                "missing tenant claim",
                spoiled(|c| {
                    c.as_object_mut().unwrap().remove("org");
                }),
            ),
            (
                "missing subject",
                spoiled(|c| {
                    c.as_object_mut().unwrap().remove("sub");
                }),
            ),
            (
                "alg none",
                unsigned(json!({"alg": "none", "typ": "JWT", "kid": "k1"}), &full),
            ),
            ("HS256 signed with the issuer's public key", {
                let mut header = Header::new(Algorithm::HS256);
                header.kid = Some("k1".into());
                jsonwebtoken::encode(
                    &header,
                    &full,
                    &EncodingKey::from_secret(ISSUER_PUBLIC).unwrap(),
                )
                .unwrap()
            }),
            (
                "signed by another key under the issuer's kid",
                sign(&full, "k1", OTHER_KEY),
            ),
            ("a tampered payload", {
                let token = sign(&claims(&issuer, "billing:read"), "k1", ISSUER_KEY);
                let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
                parts[1] = URL_SAFE_NO_PAD.encode(full.to_string());
                parts.join(".")
            }),
        ];
        for (what, token) in &cases {
            let mut raw = Raw::connect(setup.served.address).await.unwrap();
            let token = (!token.is_empty()).then_some(token.as_str());
            let response = raw
                .stateless_call(token, "billing_charge", json!({"cents": 500}))
                .await
                .unwrap();
            if token.is_none() {
                assert_eq!(response.status, 401, "{what}");
                let challenge = response.header("www-authenticate").unwrap_or_default();
                assert!(
                    challenge.contains(&format!("resource_metadata=\"{METADATA}\"")),
                    "{challenge}"
                );
                continue;
            }
            assert_refused(&response, what);
        }
        assert_eq!(setup.charged.load(Ordering::SeqCst), 0, "no handler ran");
        // A good token still works after all that.
        let accepted = charge(&setup, &good(&setup.issuer, "billing:write")).await;
        assert_eq!(accepted.status, 200, "{}", accepted.text());
        assert_eq!(setup.charged.load(Ordering::SeqCst), 500);
    })
    .await;
}

#[tokio::test]
async fn a_flood_of_unknown_key_ids_does_not_hammer_the_issuer() {
    within(async {
        let setup = setup_jwt().await;
        let claims = claims(setup.issuer.url(), "billing:write");
        for n in 0..200 {
            let response = charge(&setup, &sign(&claims, &format!("forged-{n}"), OTHER_KEY)).await;
            assert_refused(&response, "an unknown kid");
        }
        // The start-up fetch only: the refresh interval (30 s) has not passed.
        assert_eq!(setup.issuer.jwks_fetches(), 1);
        assert_eq!(setup.charged.load(Ordering::SeqCst), 0);
    })
    .await;
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_then_known() {
    within(async {
        let issuer = Issuer::start().await;
        let verifier = JwtVerifier::builder(issuer.url(), RESOURCE)
            .jwks_refresh_interval(Duration::from_secs(2))
            .discover()
            .await
            .unwrap();
        *issuer.state.jwks.lock().unwrap() = serde_json::to_value(JwkSet {
            keys: vec![jwk(ISSUER_KEY, "k1"), jwk(OTHER_KEY, "k2")],
        })
        .unwrap();
        let rotated = sign(&claims(issuer.url(), "billing:read"), "k2", OTHER_KEY);
        // Within the interval the new key is not fetched: refused, no fetch.
        assert!(verifier.verify(&rotated).await.is_err());
        assert_eq!(issuer.jwks_fetches(), 1);
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let principal = verifier.verify(&rotated).await.expect("the rotated key");
        assert_eq!(principal.subject, "alice");
        assert_eq!(principal.scopes, ["billing:read"]);
        for _ in 0..10 {
            verifier.verify(&rotated).await.unwrap();
        }
        assert_eq!(issuer.jwks_fetches(), 2);
        assert_eq!(verifier.jwks_fetches(), 2);
    })
    .await;
}

#[tokio::test]
async fn the_metadata_is_served_at_both_well_known_paths_without_a_token() {
    within(async {
        let setup = setup_jwt().await;
        support::install_crypto_provider();
        let client = support::http_client_builder().build().unwrap();
        for path in [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ] {
            let response = client
                .get(format!("http://{}{path}", setup.served.address))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{path}");
            let document: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            assert_eq!(
                document,
                json!({
                    "resource": RESOURCE,
                    "authorization_servers": [setup.issuer.url()],
                    "scopes_supported": ["billing:read", "billing:write"],
                    "bearer_methods_supported": ["header"],
                })
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_session_stays_with_the_principal_that_opened_it() {
    within(async {
        let setup = setup_jwt().await;
        let alice = good(&setup.issuer, "billing:read");
        let mut bob_claims = claims(setup.issuer.url(), "billing:read");
        bob_claims["sub"] = json!("bob");
        let bob = sign(&bob_claims, "k1", ISSUER_KEY);

        let mut raw = Raw::connect(setup.served.address).await.unwrap();
        let opened = raw.open_session(Some(&alice)).await.unwrap();
        let id = opened.header("mcp-session-id").unwrap().to_owned();
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let stolen = raw.post(Some(&bob), Some(&id), &list).await.unwrap();
        assert_eq!(stolen.status, 404, "{}", stolen.text());
        let own = raw.post(Some(&alice), Some(&id), &list).await.unwrap();
        assert_eq!(own.status, 200, "{}", own.text());
    })
    .await;
}

#[tokio::test]
async fn opaque_tokens_are_introspected_cached_briefly_and_bound_to_this_resource() {
    within(async {
        let issuer = Issuer::start().await;
        let verifier = IntrospectionVerifier::builder(issuer.url(), RESOURCE, "fusion", "s3cret")
            .claims(ClaimNames::default().tenant("org"))
            .discover()
            .await
            .unwrap();
        let answer = |aud: &str| {
            json!({"active": true, "iss": issuer.url(), "aud": aud, "sub": "carol", "org": "acme",
                   "scope": "billing:read", "exp": now() + 300})
        };
        {
            let mut opaque = issuer.state.opaque.lock().unwrap();
            opaque.insert("good".into(), answer(RESOURCE));
            opaque.insert("elsewhere".into(), answer("http://other.test/mcp"));
            let mut untenanted = answer(RESOURCE);
            untenanted.as_object_mut().unwrap().remove("org");
            opaque.insert("untenanted".into(), untenanted);
            let mut expired = answer(RESOURCE);
            expired["exp"] = json!(now() - 10);
            opaque.insert("expired".into(), expired);
        }
        let principal = verifier.verify("good").await.unwrap();
        assert_eq!(principal.subject, "carol");
        assert_eq!(principal.tenant.as_deref(), Some("acme"));
        verifier.verify("good").await.unwrap();
        assert_eq!(
            issuer.state.introspections.load(Ordering::SeqCst),
            1,
            "cached"
        );
        for refused in ["elsewhere", "untenanted", "expired", "unknown"] {
            assert!(verifier.verify(refused).await.is_err(), "{refused}");
        }
        // Refusals are not cached: each one asked again.
        assert!(verifier.verify("unknown").await.is_err());
        assert_eq!(issuer.state.introspections.load(Ordering::SeqCst), 6);
        let wrong_secret =
            IntrospectionVerifier::builder(issuer.url(), RESOURCE, "fusion", "guess")
                .discover()
                .await
                .unwrap();
        assert!(wrong_secret.verify("good").await.is_err());
    })
    .await;
}

#[tokio::test]
async fn discovery_refuses_metadata_that_names_another_issuer() {
    within(async {
        let issuer = Issuer::start().await;
        let url = issuer.url().replace("127.0.0.1", "localhost");
        let error = JwtVerifier::builder(url, RESOURCE)
            .discover()
            .await
            .unwrap_err();
        assert!(error.to_string().contains("names issuer"), "{error}");
    })
    .await;
}

/// A stateless 2026-07-28 request for `method` naming `name` in `Mcp-Name`.
async fn stateless(
    address: std::net::SocketAddr,
    token: &str,
    method: &str,
    name: &str,
    params: Value,
) -> support::RawResponse {
    let mut raw = Raw::connect(address).await.unwrap();
    let authorization = format!("Bearer {token}");
    let headers = [
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Mcp-Name", name),
        ("Authorization", authorization.as_str()),
    ];
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    raw.send("POST", &headers, Some(&message.to_string()))
        .await
        .unwrap();
    raw.response().await.unwrap()
}

#[tokio::test]
async fn a_resource_or_prompt_needing_a_scope_the_token_lacks_gets_the_step_up_challenge() {
    within(async {
        #[derive(Deserialize, JsonSchema)]
        struct Nothing {}
        let issuer = Issuer::start().await;
        let verifier = jwt_verifier(&issuer).await;
        let ran = Arc::new(AtomicU64::new(0));
        let (read, got) = (Arc::clone(&ran), Arc::clone(&ran));
        let server = ServerBuilder::new("billing", "1.0.0")
            .resource_spec(
                fusion_runtime::ResourceSpec::new(
                    "billing.ledger",
                    "billing://ledger",
                    "The ledger.",
                )
                .with_scopes(["billing:audit"])
                .handler(move |_: CallContext, _: Nothing| {
                    read.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, ToolError>("the ledger".to_owned()) }
                }),
            )
            .prompt_spec(
                fusion_runtime::PromptSpec::new("billing.close_books", "Close the books.")
                    .with_scopes(["billing:admin"])
                    .handler(move |_: CallContext, _: Nothing| {
                        got.fetch_add(1, Ordering::SeqCst);
                        async {
                            Ok::<_, ToolError>(
                                fusion_runtime::PromptMessages::new().user("Close them."),
                            )
                        }
                    }),
            )
            .access(ScopeRules::new())
            .build()
            .unwrap();
        let supported = ScopeRules::new().supported(&server);
        assert_eq!(supported, ["billing:admin", "billing:audit"]);
        let resource = ProtectedResource::new(RESOURCE, issuer.url()).scopes(supported);
        let options = HttpOptions::default()
            .auth(verifier)
            .protected_resource(resource);
        let served = Served::start(Mcp::new(server), options).await;
        let reader = good(&issuer, "billing:read");
        let challenge = |scope: &str, what: &str| {
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scope}\", \
                 resource_metadata=\"{METADATA}\", \
                 error_description=\"the token lacks a scope this {what} needs\""
            )
        };

        let refused = stateless(
            served.address,
            &reader,
            "resources/read",
            "billing://ledger",
            json!({"uri": "billing://ledger"}),
        )
        .await;
        assert_eq!(refused.status, 403, "{}", refused.text());
        assert_eq!(
            refused.header("www-authenticate").unwrap_or_default(),
            challenge("billing:audit", "resource")
        );
        let refused = stateless(
            served.address,
            &reader,
            "prompts/get",
            "billing_close_books",
            json!({"name": "billing_close_books"}),
        )
        .await;
        assert_eq!(refused.status, 403, "{}", refused.text());
        assert_eq!(
            refused.header("www-authenticate").unwrap_or_default(),
            challenge("billing:admin", "prompt")
        );
        assert_eq!(ran.load(Ordering::SeqCst), 0, "nothing ran");

        // With the scopes, both go through.
        let auditor = good(&issuer, "billing:audit billing:admin");
        let read = stateless(
            served.address,
            &auditor,
            "resources/read",
            "billing://ledger",
            json!({"uri": "billing://ledger"}),
        )
        .await;
        assert_eq!(read.status, 200, "{}", read.text());
        assert!(read.text().contains("the ledger"), "{}", read.text());
        let got = stateless(
            served.address,
            &auditor,
            "prompts/get",
            "billing_close_books",
            json!({"name": "billing_close_books"}),
        )
        .await;
        assert_eq!(got.status, 200, "{}", got.text());
        assert_eq!(ran.load(Ordering::SeqCst), 2);
    })
    .await;
}
