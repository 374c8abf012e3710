//! The in-memory tester lists a gateway's tools as `tools/list` serves them: its built-in
//! tools, then those of its mounted upstreams, under the same access policy.

mod support;

use fusion::gateway::Upstream;
use fusion::testing::Tester;
use fusion::{ActionInfo, CallContext, Principal, ServerBuilder, ToolError, ToolSpec};
use support::recorder::Recorder;
use support::*;

#[fusion::data(deserialize, schema)]
struct NoArgs {}

#[tokio::test]
async fn the_tester_lists_mounted_tools_as_tools_list_serves_them() {
    within(async {
        let upstream = Recorder::start().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .tool_spec(
                ToolSpec::query("health.ping", "Answers if alive.")
                    .handler(|_: CallContext, _: NoArgs| async { Ok::<_, ToolError>("pong") }),
            )
            .mount("up", Upstream::http(&upstream.url))
            // Bob may not delete, nor ping.
            .access(|call: &CallContext, action: ActionInfo<'_>| {
                let bob = call
                    .principal()
                    .is_some_and(|principal| principal.subject == "bob");
                !(bob && matches!(action.key().as_str(), "up.delete" | "health.ping"))
            })
            .build()
            .unwrap();
        server.upstreams_ready().await;
        for (who, hidden) in [("alice", 0), ("bob", 2)] {
            let principal = Principal::new(who);
            let tester = Tester::new(server.clone()).with_context({
                let principal = principal.clone();
                move |call| {
                    call.extensions_mut().insert(principal.clone());
                }
            });
            let listed = tester.list_tools();
            let client = connect(&server, principal, ()).await;
            let served = client.peer().list_all_tools().await.unwrap();
            assert_eq!(listed, served, "{who}");
            let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
            // The upstream's six tools and the built-in one, less what the caller may not call.
            assert_eq!(names.len(), 7 - hidden, "{who}: {names:?}");
            assert!(names.contains(&"up_echo"), "{who}: {names:?}");
            assert_eq!(
                names.contains(&"up_delete"),
                hidden == 0,
                "{who}: {names:?}"
            );
            assert_eq!(
                names.contains(&"health_ping"),
                hidden == 0,
                "{who}: {names:?}"
            );
            client.cancel().await.unwrap();
        }
        // Without an access policy: everything, built-in first.
        let open = ServerBuilder::new("gw", "1.0.0")
            .tool_spec(
                ToolSpec::query("health.ping", "Answers if alive.")
                    .handler(|_: CallContext, _: NoArgs| async { Ok::<_, ToolError>("pong") }),
            )
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        open.upstreams_ready().await;
        let listed = Tester::new(open.clone()).list_tools();
        let client = connect(&open, Principal::new("carol"), ()).await;
        assert_eq!(listed, client.peer().list_all_tools().await.unwrap());
        assert_eq!(listed[0].name, "health_ping");
        assert_eq!(listed.len(), 7);
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
        open.shutdown_upstreams().await;
    })
    .await;
}
