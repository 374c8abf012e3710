//! Credentials of HTTP upstreams: any header (`X-Api-Key`, `Authorization` with any scheme),
//! through the library and through the binary (values from `${VAR}`), reaching the upstream
//! and never the log, even at `trace`.

mod support;

use fusion::gateway::Upstream;
use fusion::serde_json::json;
use fusion::{Principal, ServerBuilder};
use support::recorder::{Options, Recorder};
use support::*;

const API_KEY: &str = "k3y-7f1c2b9a-never-log-me";

async fn requiring(header: &'static str, value: &str) -> Recorder {
    Recorder::start_with(Options {
        required_header: Some((header, value.to_owned())),
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn any_header_reaches_the_upstream() {
    within(async {
        let keyed = requiring("x-api-key", API_KEY).await;
        let token = requiring("authorization", &format!("Token {API_KEY}")).await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "keyed",
                Upstream::http(&keyed.url)
                    .header("X-Api-Key", "a stale key")
                    // The last value of a header wins.
                    .header("x-api-key", API_KEY),
            )
            .mount(
                "token",
                Upstream::http(&token.url).header("Authorization", format!("Token {API_KEY}")),
            )
            .mount("nokey", Upstream::http(&keyed.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let statuses = server.upstreams();
        assert!(
            statuses[0].connected && statuses[1].connected,
            "{statuses:?}"
        );
        // Refused with 401 without it.
        assert!(!statuses[2].connected, "{statuses:?}");
        let client = connect(&server, Principal::new("alice"), ()).await;
        for (prefix, upstream, header, value) in [
            ("keyed", &keyed, "x-api-key", API_KEY.to_owned()),
            ("token", &token, "authorization", format!("Token {API_KEY}")),
        ] {
            let echoed = call(
                client.peer(),
                &format!("{prefix}_echo"),
                json!({"message": prefix}),
            )
            .await
            .unwrap();
            assert_eq!(text_of(&echoed), format!("echo: {prefix}"));
            let sent: Vec<_> = upstream.calls_of("echo")[0]
                .headers
                .iter()
                .filter(|(name, _)| name == header)
                .map(|(_, value)| value.clone())
                .collect();
            assert_eq!(sent, [value], "{prefix}: one value, the last one set");
        }
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[test]
fn header_values_stay_out_of_debug_output_and_build_errors() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let upstream = Upstream::http("http://127.0.0.1:1/mcp")
        .header("X-Api-Key", API_KEY)
        .bearer_token(API_KEY);
    let debug = format!("{upstream:?}");
    assert!(
        debug.contains("X-Api-Key") && !debug.contains(API_KEY),
        "{debug}"
    );
    let error = ServerBuilder::new("gw", "1.0.0")
        .mount(
            "bad",
            Upstream::http("http://127.0.0.1:1/mcp")
                .header("X-Api-Key", format!("{API_KEY}\n"))
                .header("Mcp-Session-Id", "fixed"),
        )
        .build()
        .unwrap_err();
    let problems = error.problems().join("\n");
    assert!(
        problems.contains("the value of header `X-Api-Key` is not a valid HTTP header value"),
        "{problems}"
    );
    assert!(
        problems.contains("`Mcp-Session-Id` is set by the MCP transport itself"),
        "{problems}"
    );
    assert!(!problems.contains(API_KEY), "{problems}");
}

#[tokio::test]
async fn the_binary_reads_header_values_from_the_environment_and_never_logs_them() {
    within(async {
        let keyed = requiring("x-api-key", API_KEY).await;
        let token = requiring("authorization", &format!("Token {API_KEY}")).await;
        // The command line names the variables only; one upstream from the flags, one from a
        // config file.
        let config = std::env::temp_dir().join(format!(
            "fusion-gateway-headers-{}.toml",
            std::process::id()
        ));
        std::fs::write(
            &config,
            format!(
                "[upstreams.token]\nhttp = \"{}\"\nheaders = {{ Authorization = \"Token ${{GW_TEST_API_KEY}}\" }}\n",
                token.url
            ),
        )
        .unwrap();
        let args = [
            "--upstream".to_owned(),
            format!("keyed=http:{}", keyed.url),
            "--upstream-header".to_owned(),
            "keyed=X-Api-Key: ${GW_TEST_API_KEY}".to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
        ];
        let gateway = GatewayStdio::start(
            &args,
            &[("GW_TEST_API_KEY", API_KEY), ("RUST_LOG", "trace")],
        )
        .await;
        for prefix in ["keyed", "token"] {
            let echoed = call(
                gateway.client.peer(),
                &format!("{prefix}_echo"),
                json!({"message": prefix}),
            )
            .await
            .unwrap();
            assert_eq!(text_of(&echoed), format!("echo: {prefix}"));
        }
        assert!(
            keyed
                .request_headers()
                .contains(&("x-api-key".to_owned(), API_KEY.to_owned()))
        );
        assert!(token.request_headers().contains(&(
            "authorization".to_owned(),
            format!("Token {API_KEY}")
        )));
        let log = gateway.stop().await;
        std::fs::remove_file(&config).unwrap();
        // The log is there (trace level, rmcp's messages included), the key is not.
        assert!(log.contains("upstream started"), "{log}");
        assert!(log.contains("TRACE"), "{log}");
        assert!(!log.contains(API_KEY), "the key is in the log");
    })
    .await;
}
