"""The owner's page of accounts (W10): list, add, turn off and on, and API tokens per account.

Every route is the owner's only; anyone else gets 403. A token's secret is in the answer that
creates it and nowhere else (the database keeps its SHA-256 digest, ``records.users``). A turned-off
account can neither log in nor use its tokens; its data stays.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from hearth.records.users import MIN_PASSWORD, User
from hearth.scope import Scope

from ..errors import Forbidden
from .auth import TokenCreated, TokenIn, TokenOut, current_scope, get_hearth
from .models import IdPath, RequestModel, responses

router = APIRouter(prefix="/api/admin", tags=["admin"])


def owner_only(request: Request, scope: Scope = Depends(current_scope)) -> Scope:
    if not get_hearth(request).users.get(scope.user_id).is_owner:
        raise Forbidden("only the owner may manage accounts")
    return scope


class AccountOut(BaseModel):
    id: int
    name: str
    display_name: str | None
    is_owner: bool
    disabled: bool
    has_password: bool
    created_at: str
    active_tokens: int


class AccountIn(RequestModel):
    name: str = Field(min_length=1, max_length=64, description="Log-in name: letters, digits, '.', '_' or '-'")
    password: str = Field(min_length=MIN_PASSWORD, max_length=1024)


class AccountChange(RequestModel):
    disabled: bool | None = None
    password: str | None = Field(default=None, min_length=MIN_PASSWORD, max_length=1024)


def _out(request: Request, user: User) -> AccountOut:
    tokens = get_hearth(request).users.list_tokens(user.id)
    return AccountOut(id=user.id, name=user.name, display_name=user.display_name, is_owner=user.is_owner,
                      disabled=user.disabled, has_password=user.has_password, created_at=user.created_at,
                      active_tokens=sum(1 for t in tokens if t["revoked_at"] is None))


@router.get("/users", response_model=list[AccountOut], responses=responses(403))
def accounts(request: Request, _owner: Scope = Depends(owner_only)) -> list[AccountOut]:
    """Every account of this deployment, the owner first."""
    return [_out(request, user) for user in get_hearth(request).users.list()]


@router.post("/users", response_model=AccountOut, status_code=201, responses=responses(403, 409))
def add_account(body: AccountIn, request: Request, _owner: Scope = Depends(owner_only)) -> AccountOut:
    """Add an account with its password (checked before anything is written)."""
    user = get_hearth(request).users.create(body.name, body.password)
    return _out(request, user)


@router.patch("/users/{user_id:int}", response_model=AccountOut, responses=responses(403, 404))
def change_account(user_id: IdPath, body: AccountChange, request: Request,
                   _owner: Scope = Depends(owner_only)) -> AccountOut:
    """Turn an account off or on again, or give it a new password (its sessions end)."""
    users = get_hearth(request).users
    users.get(user_id)
    if body.password is not None:
        users.set_password(user_id, body.password)
    if body.disabled is not None:
        users.set_disabled(user_id, body.disabled)
    return _out(request, users.get(user_id))


@router.get("/users/{user_id:int}/tokens", response_model=list[TokenOut], responses=responses(403, 404))
def tokens(user_id: IdPath, request: Request, _owner: Scope = Depends(owner_only)) -> list[dict]:
    users = get_hearth(request).users
    users.get(user_id)
    return users.list_tokens(user_id)


@router.post("/users/{user_id:int}/tokens", response_model=TokenCreated, status_code=201,
             responses=responses(403, 404))
def create_token(user_id: IdPath, body: TokenIn, request: Request,
                 _owner: Scope = Depends(owner_only)) -> TokenCreated:
    """Issue an API token for the account; its secret is shown only in this answer."""
    users = get_hearth(request).users
    token = users.create_token(user_id, body.name)
    row = users.list_tokens(user_id)[-1]
    return TokenCreated(id=row["id"], name=row["name"], token=token)


@router.delete("/users/{user_id:int}/tokens/{token_id:int}", status_code=204, response_class=Response,
               responses=responses(403, 404))
def revoke_token(user_id: IdPath, token_id: IdPath, request: Request,
                 _owner: Scope = Depends(owner_only)) -> Response:
    get_hearth(request).users.revoke_token(user_id, token_id)
    return Response(status_code=204)
