//! What verifying a bearer token costs per call: a JWT checked against a cached JWKS
//! (`JwtVerifier`, RS256) next to a static token (`StaticTokens`). The key set is fetched
//! once, from a server on 127.0.0.1, before measuring; the bench fails if any call fetches it
//! again, so the JWT figure has no network round trip in it.

use std::time::{SystemTime, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use fusion::Principal;
use fusion::auth::{StaticTokens, TokenVerifier};
use fusion::serve::oauth::JwtVerifier;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

const KEY: &[u8] = include_bytes!("../../fusion-runtime/tests/fixtures/oauth/issuer.key.pem");
const AUDIENCE: &str = "http://mcp.bench/mcp";

fn verify(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let key = EncodingKey::from_rsa_pem(KEY).unwrap();
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("k1".into());
    let jwks = serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap();
    let (issuer, verifier) = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let jwks = jwks.clone();
                async move { ([("content-type", "application/json")], jwks) }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let verifier = JwtVerifier::builder(&issuer, AUDIENCE)
            .jwks_uri(format!("{issuer}/jwks"))
            .discover()
            .await
            .unwrap();
        (issuer, verifier)
    });
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("k1".into());
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "sub": "alice",
                        "scope": "billing:read billing:write", "exp": now + 3600});
    let jwt = jsonwebtoken::encode(&header, &claims, &key).unwrap();
    let tokens = StaticTokens::new()
        .with("a-static-token-of-32-characters!", Principal::new("alice"))
        .with("another-static-token-32-chars-ok", Principal::new("bob"));

    let mut group = c.benchmark_group("verify");
    group.bench_function("static_token", |b| {
        b.iter(|| {
            runtime
                .block_on(tokens.verify("a-static-token-of-32-characters!"))
                .unwrap()
        })
    });
    group.bench_function("jwt_rs256_cached_jwks", |b| {
        b.iter(|| runtime.block_on(verifier.verify(&jwt)).unwrap())
    });
    group.finish();
    assert_eq!(verifier.jwks_fetches(), 1, "no call fetched the keys again");
}

criterion_group!(benches, verify);
criterion_main!(benches);
