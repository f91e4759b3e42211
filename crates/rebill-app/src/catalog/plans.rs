//! The site's catalogue: plans and their add-ons, created, read, updated, deleted (kept, marked
//! deleted: subscriptions still name them) and listed. Deleted plans and add-ons are left out of
//! lists and are not found by code.

use rebill_store::plans::{AddOn, AddOnFields, Plan, PlanFields};
use rebill_store::{Page, PageRequest, StoreError};

use crate::{Context, Services};

/// Why a catalogue operation changed or found nothing.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The site has no live plan with this code.
    #[error("no plan with code {0}")]
    PlanNotFound(String),
    /// The plan has no live add-on with this code.
    #[error("no add-on with code {0}")]
    AddOnNotFound(String),
    /// The site already has a plan with this code (a deleted one counts).
    #[error("the plan code {0} is taken")]
    PlanTaken(String),
    /// The plan already has an add-on with this code (a deleted one counts).
    #[error("the add-on code {0} is taken")]
    AddOnTaken(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for CatalogError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::DuplicatePlan(code) => Self::PlanTaken(code),
            StoreError::DuplicateAddOn(code) => Self::AddOnTaken(code),
            e => Self::Store(e),
        }
    }
}

/// The site's live plan `code`.
pub async fn plan(services: &Services, ctx: &Context, code: &str) -> Result<Plan, CatalogError> {
    match services.store.plan(ctx.site.id, code).await? {
        Some(plan) if !plan.is_deleted() => Ok(plan),
        _ => Err(CatalogError::PlanNotFound(code.to_owned())),
    }
}

/// A page of the site's live plans.
pub async fn plans(services: &Services, ctx: &Context, page: &PageRequest) -> Result<Page<Plan>, CatalogError> {
    Ok(services.store.list_plans(ctx.site.id, page).await?)
}

/// Creates the plan `code`.
pub async fn create_plan(
    services: &Services,
    ctx: &Context,
    code: &str,
    fields: &PlanFields,
) -> Result<Plan, CatalogError> {
    Ok(services.store.create_plan(ctx.site.id, code, fields, ctx.now).await?)
}

/// Changes the fields of the plan `code` that `fields` holds.
pub async fn update_plan(
    services: &Services,
    ctx: &Context,
    code: &str,
    fields: &PlanFields,
) -> Result<Plan, CatalogError> {
    services
        .store
        .update_plan(ctx.site.id, code, fields, ctx.now)
        .await?
        .ok_or_else(|| CatalogError::PlanNotFound(code.to_owned()))
}

/// Deletes the plan `code` (it stays readable for the subscriptions that name it).
pub async fn delete_plan(services: &Services, ctx: &Context, code: &str) -> Result<Plan, CatalogError> {
    services
        .store
        .delete_plan(ctx.site.id, code, ctx.now)
        .await?
        .ok_or_else(|| CatalogError::PlanNotFound(code.to_owned()))
}

/// The plan `code`, deleted or not, with its live add-ons (for naming what a subscription
/// holds); `None` when the site never had it.
pub async fn plan_with_add_ons(
    services: &Services,
    ctx: &Context,
    code: &str,
) -> Result<Option<(Plan, Vec<AddOn>)>, CatalogError> {
    let Some(plan) = services.store.plan(ctx.site.id, code).await? else { return Ok(None) };
    let add_ons = services.store.add_ons(plan.id).await?;
    Ok(Some((plan, add_ons)))
}

/// Every live add-on of `plan`, oldest first (not a page).
pub async fn all_add_ons(services: &Services, plan: &Plan) -> Result<Vec<AddOn>, CatalogError> {
    Ok(services.store.add_ons(plan.id).await?)
}

/// The live add-on `code` of `plan`.
pub async fn add_on(services: &Services, plan: &Plan, code: &str) -> Result<AddOn, CatalogError> {
    match services.store.add_on(plan.id, code).await? {
        Some(add_on) if !add_on.is_deleted() => Ok(add_on),
        _ => Err(CatalogError::AddOnNotFound(code.to_owned())),
    }
}

/// A page of the live add-ons of `plan`.
pub async fn add_ons(services: &Services, plan: &Plan, page: &PageRequest) -> Result<Page<AddOn>, CatalogError> {
    Ok(services.store.list_add_ons(plan.id, page).await?)
}

/// Creates the add-on `code` on `plan`.
pub async fn create_add_on(
    services: &Services,
    ctx: &Context,
    plan: &Plan,
    code: &str,
    fields: &AddOnFields,
) -> Result<AddOn, CatalogError> {
    Ok(services.store.create_add_on(plan.id, code, fields, ctx.now).await?)
}

/// Changes the fields of the add-on `code` of `plan` that `fields` holds.
pub async fn update_add_on(
    services: &Services,
    ctx: &Context,
    plan: &Plan,
    code: &str,
    fields: &AddOnFields,
) -> Result<AddOn, CatalogError> {
    services
        .store
        .update_add_on(plan.id, code, fields, ctx.now)
        .await?
        .ok_or_else(|| CatalogError::AddOnNotFound(code.to_owned()))
}

/// Deletes the add-on `code` of `plan`.
pub async fn delete_add_on(services: &Services, ctx: &Context, plan: &Plan, code: &str) -> Result<AddOn, CatalogError> {
    services
        .store
        .delete_add_on(plan.id, code, ctx.now)
        .await?
        .ok_or_else(|| CatalogError::AddOnNotFound(code.to_owned()))
}

impl From<CatalogError> for crate::platform::error::AppError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::PlanNotFound(code) => Self::NotFound(crate::platform::error::Missing::plan(&code)),
            CatalogError::AddOnNotFound(code) => Self::NotFound(crate::platform::error::Missing::add_on(&code)),
            CatalogError::PlanTaken(_) => Self::refused("plan_code", "taken", "has already been taken"),
            CatalogError::AddOnTaken(_) => Self::refused("add_on_code", "taken", "has already been taken"),
            CatalogError::Store(e) => e.into(),
        }
    }
}
