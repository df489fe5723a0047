//! The facade's Settings → Assistant page and its Python editor: delegations to
//! [`crate::assistant`].

use super::Companion;
use crate::error::CompanionError;
use crate::python::view::{
    AssistantInput, AssistantView, CallbackTryView, PythonFileView, PythonRunView,
};
use crate::settings::assistant::PythonFileSettings;

impl Companion {
    /// The assistant's settings page.
    pub fn assistant(&self) -> AssistantView {
        self.assistant.assistant()
    }

    /// Saves the instruction and the built-in tools; the next turn uses them.
    pub fn save_assistant(&self, input: AssistantInput) -> Result<AssistantView, CompanionError> {
        self.assistant.save_assistant(input)
    }

    /// A file's source.
    pub fn python_source(&self, name: &str) -> Result<String, CompanionError> {
        self.assistant.python_source(name)
    }

    /// Saves a file (creating it), loads the folder again and rebuilds the agent; answers the
    /// file's status, so the editor shows its error at once.
    pub async fn save_python_file(
        &self,
        name: &str,
        source: &str,
    ) -> Result<PythonFileView, CompanionError> {
        self.assistant.save_python_file(name, source).await
    }

    /// Creates a file from the template; refuses to overwrite one.
    pub async fn create_python_file(&self, name: &str) -> Result<PythonFileView, CompanionError> {
        self.assistant.create_python_file(name).await
    }

    /// Deletes a file.
    pub async fn delete_python_file(&self, name: &str) -> Result<(), CompanionError> {
        self.assistant.delete_python_file(name).await
    }

    /// Sets what a file may reach.
    pub fn set_python_file_settings(
        &self,
        name: &str,
        file: PythonFileSettings,
    ) -> Result<PythonFileView, CompanionError> {
        self.assistant.set_python_file_settings(name, file)
    }

    /// One file's status.
    pub fn python_file(&self, name: &str) -> Result<PythonFileView, CompanionError> {
        self.assistant.python_file(name)
    }

    /// The editor's template for a new file.
    pub fn python_template(&self) -> &'static str {
        self.assistant.python_template()
    }

    /// Loads every Python file again and rebuilds the agent.
    pub async fn reload_python(&self) -> Result<(), CompanionError> {
        self.assistant.reload_python().await
    }

    /// Runs a Python tool from the editor with arguments the user typed (a JSON object). A tool
    /// that needs approval answers its card first; run it again with `approved` to send.
    pub async fn run_python_tool(
        &self,
        file: &str,
        tool: &str,
        args: &str,
        approved: bool,
    ) -> Result<PythonRunView, CompanionError> {
        self.assistant
            .run_python_tool(file, tool, args, approved)
            .await
    }

    /// Tries a file's callback on a sample: a request asking about tomorrow (model kinds), a
    /// call of the first built-in tool (tool kinds), or the turn (agent kinds).
    pub async fn try_python_callback(
        &self,
        file: &str,
        kind: &str,
    ) -> Result<CallbackTryView, CompanionError> {
        self.assistant.try_python_callback(file, kind).await
    }
}
