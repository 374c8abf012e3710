//! The tester answers the questions a tool asks, as its test scripts them: the user accepts
//! (with a value, or a confirmation), declines or cancels; the client's model writes a given
//! text; the client has given roots. A tool that asks runs again with its answers, as on
//! protocol 2026-07-28, and the result says what it asked. And every call can act for a
//! principal of a tenant.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fusion::testing::{Elicited, Question, SAMPLING_MODEL, Tester};
use fusion::{
    Answer, Elicit, Principal, Roots, Sample, SamplingRequest, Server, ServerBuilder, State,
    ToolError, tool,
};
use serde_json::{Value, json};

#[fusion::data(deserialize, schema)]
struct Name {
    /// Your name.
    name: String,
}

/// How many times the handlers below ran to their end.
#[derive(Default)]
struct Runs(AtomicUsize);

/// Deletes the desk once the user confirms: nothing happens before the answer.
#[tool(mutation, name = "desk.clear")]
async fn clear(ask: Elicit, runs: State<Runs>) -> Result<&'static str, ToolError> {
    if !ask.confirm("Clear the whole desk?").await? {
        return Ok("kept");
    }
    runs.0.fetch_add(1, Ordering::SeqCst);
    Ok("cleared")
}

/// Asks the user's name.
#[tool(query, name = "desk.hello")]
async fn hello(ask: Elicit) -> Result<String, ToolError> {
    Ok(match ask.ask::<Name>("What is your name?").await? {
        Answer::Accepted(Name { name }) => format!("Hello, {name}!"),
        Answer::Declined => "declined".to_owned(),
        Answer::Cancelled => "cancelled".to_owned(),
    })
}

/// Asks the client's model, then the roots.
#[tool(query, name = "desk.brief")]
async fn brief(sample: Sample, roots: Roots) -> Result<Value, ToolError> {
    let sampled = sample
        .create(
            SamplingRequest::new(40)
                .system("Be brief.")
                .user("Summarize the desk."),
        )
        .await?;
    let roots: Vec<String> = roots
        .list()
        .await?
        .into_iter()
        .map(|root| root.uri)
        .collect();
    Ok(json!({"summary": sampled.text, "model": sampled.model, "roots": roots}))
}

/// Who calls, and for which tenant.
#[tool(query, name = "desk.whoami")]
async fn whoami(caller: Principal) -> Result<Value, ToolError> {
    Ok(json!({"subject": caller.subject, "tenant": caller.tenant}))
}

fn server(runs: &Arc<Runs>) -> Server {
    ServerBuilder::new("desk", "1.0.0")
        .state_arc(Arc::clone(runs))
        .tool::<clear>()
        .tool::<hello>()
        .tool::<brief>()
        .tool::<whoami>()
        .build()
        .expect("the desk builds")
}

#[tokio::test]
async fn a_confirmation_is_answered_and_the_tool_runs_again_with_it() {
    let runs = Arc::new(Runs::default());
    let tester = Tester::new(server(&runs)).answer_elicitation(Elicited::confirm());
    let result = tester.call("desk.clear", json!({})).await;
    assert!(!result.is_error(), "{}", result.raw_text());
    assert_eq!(result.data(), "cleared");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1, "the effect happened once");
    let [Question::Elicitation { message, schema }] = result.questions() else {
        panic!("one question: {:?}", result.questions());
    };
    assert_eq!(message, "Clear the whole desk?");
    assert_eq!(schema["required"], json!(["confirm"]));
}

#[tokio::test]
async fn the_user_can_accept_with_a_value_decline_or_cancel() {
    let runs = Arc::new(Runs::default());
    for (answer, expected) in [
        (Elicited::accept(json!({"name": "Ada"})), "Hello, Ada!"),
        (Elicited::Decline, "declined"),
        (Elicited::Cancel, "cancelled"),
    ] {
        let tester = Tester::new(server(&runs)).answer_elicitation(answer);
        let result = tester.call("desk.hello", json!({})).await;
        assert_eq!(result.data(), expected, "{}", result.raw_text());
        assert_eq!(result.questions().len(), 1);
    }
    // A decline of the confirmation changes nothing.
    let tester = Tester::new(server(&runs)).answer_elicitation(Elicited::Decline);
    assert_eq!(tester.call("desk.clear", json!({})).await.data(), "kept");
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_answer_that_does_not_fit_the_form_is_a_validation_error() {
    let runs = Arc::new(Runs::default());
    let tester =
        Tester::new(server(&runs)).answer_elicitation(Elicited::accept(json!({"name": 7})));
    let result = tester.call("desk.hello", json!({})).await;
    assert_eq!(result.error_code(), Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn answers_can_depend_on_the_question() {
    let runs = Arc::new(Runs::default());
    let tester = Tester::new(server(&runs)).answer_elicitation_with(|question| match question {
        Question::Elicitation { message, .. } if message.contains("name") => {
            Elicited::accept(json!({"name": "Grace"}))
        }
        _ => Elicited::Decline,
    });
    assert_eq!(
        tester.call("desk.hello", json!({})).await.data(),
        "Hello, Grace!"
    );
    assert_eq!(tester.call("desk.clear", json!({})).await.data(), "kept");
}

#[tokio::test]
async fn the_model_and_the_roots_answer_as_scripted() {
    let runs = Arc::new(Runs::default());
    let tester = Tester::new(server(&runs))
        .answer_sampling("Two notes and a pen.")
        .answer_roots(["file:///home/ann/desk", "file:///srv/shared"]);
    let result = tester.call("desk.brief", json!({})).await;
    assert!(!result.is_error(), "{}", result.raw_text());
    assert_eq!(
        result.data(),
        &json!({
            "summary": "Two notes and a pen.",
            "model": SAMPLING_MODEL,
            "roots": ["file:///home/ann/desk", "file:///srv/shared"],
        })
    );
    assert_eq!(
        result.questions(),
        [
            Question::Sampling {
                messages: vec!["Summarize the desk.".to_owned()],
                system_prompt: Some("Be brief.".to_owned()),
                max_tokens: 40,
            },
            Question::Roots,
        ]
    );
}

#[tokio::test]
async fn what_is_not_scripted_cannot_be_asked() {
    let runs = Arc::new(Runs::default());
    // Nothing scripted: no client to ask.
    let tester = Tester::new(server(&runs));
    let result = tester.call("desk.clear", json!({})).await;
    assert_eq!(result.error_code(), Some("ELICITATION_UNSUPPORTED"));
    // The model answers, but the client has no roots to give.
    let tester = Tester::new(server(&runs)).answer_sampling("ok");
    let result = tester.call("desk.brief", json!({})).await;
    assert_eq!(result.error_code(), Some("ROOTS_UNSUPPORTED"));
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn every_call_acts_for_the_principal_and_tenant_given_in_one_call() {
    let runs = Arc::new(Runs::default());
    let anonymous = Tester::new(server(&runs))
        .call("desk.whoami", json!({}))
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHORIZED"));
    let tester =
        Tester::new(server(&runs)).with_principal(Principal::new("ann").with_tenant("t_1"));
    let result = tester.call("desk.whoami", json!({})).await;
    assert_eq!(result.data(), &json!({"subject": "ann", "tenant": "t_1"}));
}
