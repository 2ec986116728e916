"""Tokens for the standing users, and a small JSON client that sends them."""

import json
from dataclasses import dataclass

import pytest
from django.test import Client

from apps.accounts.services import api_token_create


@dataclass
class Answer:
    status: int
    body: dict | list
    headers: dict


class Api:
    """Django's test client speaking JSON to /api/v1/ with one token (or none)."""

    def __init__(self, secret: str | None):
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {secret}"} if secret else {}

    def _answer(self, response) -> Answer:
        body = json.loads(response.content) if response.content else {}
        return Answer(status=response.status_code, body=body, headers=dict(response.headers))

    def get(self, path: str, **params) -> Answer:
        return self._answer(self.client.get("/api/v1" + path, params, headers=self.headers))

    def put(self, path: str, body) -> Answer:
        return self._answer(
            self.client.put(
                "/api/v1" + path,
                json.dumps(body),
                content_type="application/json",
                headers=self.headers,
            )
        )

    def post(self, path: str, body) -> Answer:
        return self._answer(
            self.client.post(
                "/api/v1" + path,
                json.dumps(body),
                content_type="application/json",
                headers=self.headers,
            )
        )


def api_for(user) -> Api:
    return Api(api_token_create(user=user, name="test").secret)


@pytest.fixture
def member_api(member):
    return api_for(member)


@pytest.fixture
def lead_api(lead):
    return api_for(lead)


@pytest.fixture
def outsider_api(outsider):
    return api_for(outsider)


@pytest.fixture
def staff_api(staff):
    return api_for(staff)


@pytest.fixture
def anonymous_api(db):
    return Api(None)
