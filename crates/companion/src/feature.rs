//! What every stateful feature is: the context plus the feature's own state, cheap to clone,
//! with a weak version for the feature's background tasks (a watcher, a loop, a server) so they
//! never keep the app alive. A feature reads the context as its own (`Deref`): what it adds is
//! its state, not another context.

use std::sync::{Arc, Weak};

use crate::context::{Context, WeakContext};

/// A feature: the context and `S`, the feature's state.
pub(crate) struct Feature<S> {
    ctx: Context,
    state: Arc<S>,
}

// Derived `Clone` would ask `S: Clone`; only the handles are cloned.
impl<S> Clone for Feature<S> {
    fn clone(&self) -> Self {
        Feature {
            ctx: self.ctx.clone(),
            state: self.state.clone(),
        }
    }
}

impl<S> std::ops::Deref for Feature<S> {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl<S> Feature<S> {
    pub(crate) fn new(ctx: Context, state: S) -> Feature<S> {
        Feature {
            ctx,
            state: Arc::new(state),
        }
    }

    /// The feature's own state.
    pub(crate) fn state(&self) -> &S {
        &self.state
    }

    /// A handle that does not keep the app alive.
    pub(crate) fn downgrade(&self) -> WeakFeature<S> {
        WeakFeature {
            ctx: self.ctx.downgrade(),
            state: Arc::downgrade(&self.state),
        }
    }
}

/// A [`Feature`] that does not keep the app alive.
pub(crate) struct WeakFeature<S> {
    ctx: WeakContext,
    state: Weak<S>,
}

impl<S> Clone for WeakFeature<S> {
    fn clone(&self) -> Self {
        WeakFeature {
            ctx: self.ctx.clone(),
            state: self.state.clone(),
        }
    }
}

impl<S> WeakFeature<S> {
    /// The feature, unless the app has closed.
    pub(crate) fn upgrade(&self) -> Option<Feature<S>> {
        Some(Feature {
            ctx: self.ctx.upgrade()?,
            state: self.state.upgrade()?,
        })
    }
}
