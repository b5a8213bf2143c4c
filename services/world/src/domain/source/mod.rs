//! Response sources (D2, D20, D22): content-addressed definitions, the kinds that can run
//! them, the async [`ResponseSource`] trait every implementation fulfils, and how a source's
//! raw answer becomes JSON context (or a classified failure). Whether a source is a toy or a
//! real service is invisible here: a definition says how to reach it, a workflow says how its
//! result enters context, and only a WorldPatch ever changes the world (D7).

pub mod definition;
pub mod invoke;
pub mod kinds;
pub mod response;

pub use definition::{
    HttpJsonInterface, LlmChatInterface, ResponseSourceDefinition, SchemaDelivery, SourceInterface,
};
pub use invoke::{
    ChatRequest, ResponseSchema, ResponseSource, SourceError, SourceInvocationContext,
    SourceOutput, SourceRequest,
};
pub use kinds::{SourceKind, SourceKinds, SourceRole};
pub use response::{JsonVerdict, RefusedResponse, judge_json_response};
