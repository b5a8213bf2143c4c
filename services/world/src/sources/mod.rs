//! The source implementations (transport only) and the registry that builds one for each
//! source definition. The kernel sees only `ResponseSource`; a new kind (MCP next, D20) is
//! one more [`SourceFactory`] registered with its [`SourceKind`], and nothing else.

pub mod env;
pub mod http_json;
pub mod llm_chat;

use std::collections::BTreeMap;
use std::sync::Arc;

use noema_tools::http_json::HttpJsonClient;

use crate::domain::problem::Problem;
use crate::domain::source::kinds::{HTTP_JSON, LLM_CHAT_COMPLETIONS};
use crate::domain::source::{
    HttpJsonInterface, LlmChatInterface, ResponseSource, ResponseSourceDefinition, SourceKind,
    SourceKinds,
};

pub use env::SourceEnv;
pub use http_json::HttpJsonSource;
pub use llm_chat::{LlmChatSource, LlmDefaults};

/// Builds the implementation of one kind's source definitions.
pub trait SourceFactory: Send + Sync {
    /// The source for `definition` (whose interface already matched the kind's schema).
    fn build(
        &self,
        definition: &ResponseSourceDefinition,
    ) -> Result<Arc<dyn ResponseSource>, Vec<Problem>>;
}

/// The kinds this service runs, and how to build each.
#[derive(Clone)]
pub struct SourceRegistry {
    kinds: SourceKinds,
    factories: BTreeMap<String, Arc<dyn SourceFactory>>,
}

impl std::fmt::Debug for SourceRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

struct HttpJsonFactory {
    client: HttpJsonClient,
    env: Arc<SourceEnv>,
}

impl SourceFactory for HttpJsonFactory {
    fn build(
        &self,
        definition: &ResponseSourceDefinition,
    ) -> Result<Arc<dyn ResponseSource>, Vec<Problem>> {
        Ok(Arc::new(HttpJsonSource::new(
            self.client.clone(),
            HttpJsonInterface::of(definition)?,
            Arc::clone(&self.env),
        )))
    }
}

struct LlmChatFactory {
    http: reqwest::Client,
    defaults: Arc<LlmDefaults>,
    env: Arc<SourceEnv>,
}

impl SourceFactory for LlmChatFactory {
    fn build(
        &self,
        definition: &ResponseSourceDefinition,
    ) -> Result<Arc<dyn ResponseSource>, Vec<Problem>> {
        Ok(Arc::new(LlmChatSource::new(
            self.http.clone(),
            LlmChatInterface::of(definition)?,
            Arc::clone(&self.defaults),
            Arc::clone(&self.env),
        )))
    }
}

impl SourceRegistry {
    /// `llm_chat_completions` and `http_json`.
    pub fn standard(
        http_json: HttpJsonClient,
        llm: LlmDefaults,
        env: Arc<SourceEnv>,
    ) -> Result<SourceRegistry, reqwest::Error> {
        let http = noema_tools::tls::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let mut factories: BTreeMap<String, Arc<dyn SourceFactory>> = BTreeMap::new();
        factories.insert(
            HTTP_JSON.to_owned(),
            Arc::new(HttpJsonFactory {
                client: http_json,
                env: Arc::clone(&env),
            }),
        );
        factories.insert(
            LLM_CHAT_COMPLETIONS.to_owned(),
            Arc::new(LlmChatFactory {
                http,
                defaults: Arc::new(llm),
                env,
            }),
        );
        Ok(SourceRegistry {
            kinds: SourceKinds::standard(),
            factories,
        })
    }

    /// This registry with one more kind (replacing a kind of the same name).
    pub fn with(mut self, kind: Arc<dyn SourceKind>, factory: Arc<dyn SourceFactory>) -> Self {
        self.factories.insert(kind.name().to_owned(), factory);
        self.kinds = self.kinds.with(kind);
        self
    }

    /// The kinds, for component checks and assembly.
    pub fn kinds(&self) -> &SourceKinds {
        &self.kinds
    }

    /// The implementation of `definition`.
    pub fn build(
        &self,
        definition: &ResponseSourceDefinition,
    ) -> Result<Arc<dyn ResponseSource>, Vec<Problem>> {
        self.kinds.check(definition)?;
        let factory = self.factories.get(definition.kind()).ok_or_else(|| {
            vec![Problem::new(
                "/interface/name",
                format!("no implementation of source kind {:?}", definition.kind()),
            )]
        })?;
        factory.build(definition)
    }
}
