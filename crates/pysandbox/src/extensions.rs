//! The user's extensions folder: every `.py` file in it, and the apps in Google's layout in it
//! ([`crate::layout`]), loaded as tools and callbacks.
//!
//! Files load in the folder's order, which is the order their callbacks run in. A file that does not
//! load (a syntax error, an exception at the top level, a tool name already taken) is left out
//! with a [`LoadError`] carrying the traceback and line; the others load regardless, so one bad
//! file never stops the agent.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use agent::{AgentTool, LlmAgentBuilder};

use crate::callbacks::PythonCallback;
use crate::error::LoadError;
use crate::host::Host;
use crate::layout::{Declared, Folder, SourceFile};
use crate::module::PythonModule;
use crate::report::Reporter;
use crate::runtime::Sandbox;
use crate::tool::PythonTool;

/// The tools and callbacks of a set of Python files, and the files that failed to load.
#[derive(Debug, Default)]
pub struct PythonExtensions {
    /// The tools, in file order.
    pub tools: Vec<Arc<PythonTool>>,
    /// The callbacks, in file order (and within a file in the order of a turn).
    pub callbacks: Vec<PythonCallback>,
    /// The files that did not load, and why.
    pub errors: Vec<LoadError>,
}

impl PythonExtensions {
    /// Loads the extensions of `dir` ([`Folder::read`]): its `.py` files, and the apps in
    /// Google's layout in it. Only an unreadable folder is an error; a bad file is recorded in
    /// [`PythonExtensions::errors`].
    pub async fn load_dir(
        sandbox: &Sandbox,
        dir: &Path,
        host: Arc<dyn Host>,
        reporter: Reporter,
    ) -> Result<PythonExtensions, LoadError> {
        let folder = Folder::read(dir).map_err(|source| LoadError::ReadDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut loaded = Self::load_files(sandbox, folder.files, host, reporter).await;
        let mut errors = folder.errors;
        errors.append(&mut loaded.errors);
        loaded.errors = errors;
        Ok(loaded)
    }

    /// Loads files given as (file name, source), in the order given, each standing alone.
    pub async fn load_sources(
        sandbox: &Sandbox,
        files: impl IntoIterator<Item = (String, String)>,
        host: Arc<dyn Host>,
        reporter: Reporter,
    ) -> PythonExtensions {
        let files = files.into_iter().map(|(name, source)| SourceFile {
            name,
            source,
            declared: Declared::Standalone,
        });
        Self::load_files(sandbox, files, host, reporter).await
    }

    /// Loads files as their folder declared them ([`Folder::files`]), in the order given.
    pub async fn load_files(
        sandbox: &Sandbox,
        files: impl IntoIterator<Item = SourceFile>,
        host: Arc<dyn Host>,
        reporter: Reporter,
    ) -> PythonExtensions {
        let mut loaded = PythonExtensions::default();
        let mut owners: HashMap<String, String> = HashMap::new();
        for SourceFile {
            name: file,
            source,
            declared,
        } in files
        {
            let module =
                match PythonModule::load_declared(sandbox, file.clone(), source, &declared).await {
                    Ok(module) => Arc::new(module),
                    Err(error) => {
                        loaded.errors.push(LoadError::Python { file, error });
                        continue;
                    }
                };
            if module.tools().is_empty() && module.callbacks().is_empty() {
                loaded.errors.push(LoadError::NothingDeclared {
                    file,
                    functions: module.functions().to_vec(),
                });
                continue;
            }
            let mut seen: HashMap<&str, &str> = HashMap::new();
            let duplicate = module.tools().iter().find_map(|t| {
                let first = owners
                    .get(&t.name)
                    .map(String::as_str)
                    .or_else(|| seen.get(t.name.as_str()).copied());
                seen.insert(&t.name, &file);
                first.map(|first| (t.name.clone(), first.to_owned()))
            });
            if let Some((tool, first)) = duplicate {
                loaded
                    .errors
                    .push(LoadError::DuplicateTool { file, tool, first });
                continue;
            }
            for tool in PythonTool::all(&module, sandbox, &host, &reporter) {
                owners.insert(tool.spec().name.clone(), file.clone());
                loaded.tools.push(Arc::new(tool));
            }
            loaded
                .callbacks
                .extend(PythonCallback::all(&module, sandbox, &host, &reporter));
        }
        loaded
    }

    /// Adds the tools and callbacks to an agent (after whatever it already has).
    pub fn add_to(&self, mut builder: LlmAgentBuilder) -> LlmAgentBuilder {
        for tool in &self.tools {
            let tool: Arc<dyn AgentTool> = tool.clone();
            builder = builder.shared_tool(tool);
        }
        let descriptions = Arc::new(crate::callbacks::descriptions_of(&builder));
        for callback in &self.callbacks {
            builder = callback
                .clone()
                .with_descriptions(descriptions.clone())
                .add_to(builder);
        }
        builder
    }
}
