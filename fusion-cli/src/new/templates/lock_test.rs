//! The reviewed surface: `FUSION_LOCK=update cargo test --test lock` writes `fusion.lock`;
//! `cargo test` fails when the served surface is not the reviewed one.

#[tokio::test]
async fn the_surface_is_the_reviewed_one() {
    let server = __IDENT__::server_from_env().await.expect("the server builds");
    fusion::lock::check(&server, "fusion.lock");
}
