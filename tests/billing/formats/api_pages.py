"""Saved API pages in the documented shapes (shared/reference/api-spend-formats.md), small
enough to add up by hand."""

import csv
import json
from pathlib import Path

JAN_2 = 1735776000  # 2025-01-02T00:00:00Z
DAY = 86_400


def write_json(path: Path, *pages) -> Path:
    """Pages as a user saves them: one per line when there are several (`curl >> file`)."""
    path.write_text("\n".join(json.dumps(page, indent=2) for page in pages), encoding="utf-8")
    return path


def openai_costs_page() -> dict:
    return {
        "object": "page",
        "data": [
            {
                "object": "bucket",
                "start_time": JAN_2,
                "end_time": JAN_2 + DAY,
                "results": [
                    {
                        "object": "organization.costs.result",
                        "amount": {"value": 0.06, "currency": "usd"},
                        "line_item": "gpt-4o-2024-08-06, input",
                        "project_id": "proj_abc",
                    },
                    {
                        "object": "organization.costs.result",
                        "amount": {"value": 1.25, "currency": "usd"},
                        "line_item": "gpt-4o-2024-08-06, cached input",
                        "project_id": "proj_abc",
                    },
                ],
            },
            {
                "object": "bucket",
                "start_time": JAN_2 + DAY,
                "end_time": JAN_2 + 2 * DAY,
                "results": [
                    {
                        "object": "organization.costs.result",
                        "amount": {"value": 2.5, "currency": "usd"},
                        "line_item": "priority | gpt-4.1, output, long context",
                        "project_id": "proj_def",
                    },
                    {
                        "object": "organization.costs.result",
                        "amount": {"value": 0.1, "currency": "usd"},
                        "line_item": "web search tool calls",
                        "project_id": None,
                    },
                ],
            },
        ],
        "has_more": False,
        "next_page": None,
    }


def openai_usage_page() -> dict:
    return {
        "object": "page",
        "data": [
            {
                "object": "bucket",
                "start_time": JAN_2,
                "end_time": JAN_2 + DAY,
                "results": [
                    {
                        "object": "organization.usage.completions.result",
                        "input_tokens": 1000,
                        "output_tokens": 500,
                        "input_cached_tokens": 800,
                        "num_model_requests": 5,
                        "project_id": "proj_abc",
                        "api_key_id": "key_1",
                        "model": "gpt-4o-mini-2024-07-18",
                        "batch": None,
                    },
                    {
                        "object": "organization.usage.completions.result",
                        "input_tokens": 300,
                        "output_tokens": 0,
                        "input_cached_tokens": 0,
                        "num_model_requests": 2,
                        "project_id": "proj_abc",
                        "api_key_id": "key_1",
                        "model": "ft:my-own-model",
                        "batch": None,
                    },
                ],
            }
        ],
        "has_more": False,
        "next_page": None,
    }


def anthropic_cost_page() -> dict:
    bucket = {"starting_at": "2025-01-02T00:00:00Z", "ending_at": "2025-01-03T00:00:00Z"}
    return {
        "data": [
            {
                **bucket,
                "results": [
                    {
                        "currency": "USD",
                        "amount": "123.45",
                        "workspace_id": "wrkspc_1",
                        "description": "Claude Sonnet 4.5 Usage - Output Tokens",
                        "cost_type": "tokens",
                        "model": "claude-sonnet-4-5-20250929",
                        "token_type": "output_tokens",
                    },
                    {
                        "currency": "USD",
                        "amount": "0.5",
                        "workspace_id": None,
                        "description": "Claude Sonnet 4.5 Usage - Cache Read",
                        "cost_type": "tokens",
                        "model": "claude-sonnet-4-5-20250929",
                        "token_type": "cache_read_input_tokens",
                    },
                ],
            }
        ],
        "has_more": False,
        "next_page": None,
    }


def anthropic_usage_page() -> dict:
    return {
        "data": [
            {
                "starting_at": "2025-01-02T00:00:00Z",
                "ending_at": "2025-01-03T00:00:00Z",
                "results": [
                    {
                        "uncached_input_tokens": 1000,
                        "cache_read_input_tokens": 2000,
                        "cache_creation": {
                            "ephemeral_5m_input_tokens": 100,
                            "ephemeral_1h_input_tokens": 0,
                        },
                        "output_tokens": 400,
                        "server_tool_use": {"web_search_requests": 0},
                        "api_key_id": "apikey_9",
                        "workspace_id": "wrkspc_1",
                        "model": "claude-sonnet-4-5-20250929",
                        "service_tier": "standard",
                    }
                ],
            }
        ],
        "has_more": False,
        "next_page": None,
    }


LITELLM_COLUMNS = [
    "request_id",
    "call_type",
    "api_key",
    "spend",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "startTime",
    "endTime",
    "model",
    "model_group",
    "custom_llm_provider",
    "user",
    "team_id",
    "request_tags",
    "status",
]


KEY = "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b"


def litellm_rows() -> list[dict]:
    base = {
        "call_type": "acompletion",
        "api_key": KEY,
        "model_group": "gpt-4o",
        "custom_llm_provider": "openai",
        "user": "ana",
        "team_id": "team-search",
        "status": "success",
    }
    return [
        {
            **base,
            "request_id": "chatcmpl-1",
            "spend": "0.0125",
            "total_tokens": "1500",
            "prompt_tokens": "1000",
            "completion_tokens": "500",
            "startTime": "2025-01-02T10:00:00.120000Z",
            "endTime": "2025-01-02T10:00:02.500000Z",
            "model": "gpt-4o-2024-08-06",
            "request_tags": '["prod", "service:ranker"]',
        },
        {
            **base,
            "request_id": "chatcmpl-2",
            "spend": "0.00375",
            "total_tokens": "",
            "prompt_tokens": "300",
            "completion_tokens": "100",
            "startTime": "2025-01-03T08:00:00Z",
            "endTime": "2025-01-03T08:00:01Z",
            "model": "gpt-4o-2024-08-06",
            "request_tags": "[]",
        },
    ]


def write_litellm_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=LITELLM_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def openrouter_generation(gen_id: str, cost: float, created: str) -> dict:
    return {
        "data": {
            "id": gen_id,
            "upstream_id": "chatcmpl-x",
            "total_cost": cost,
            "cache_discount": None,
            "upstream_inference_cost": cost,
            "created_at": created,
            "model": "anthropic/claude-sonnet-4.5",
            "provider_name": "Anthropic",
            "app_id": 42,
            "external_user": None,
            "is_byok": False,
            "streamed": True,
            "tokens_prompt": 900,
            "tokens_completion": 100,
            "native_tokens_prompt": 1000,
            "native_tokens_completion": 120,
            "native_tokens_cached": 600,
        }
    }


def openrouter_activity_page() -> dict:
    return {
        "data": [
            {
                "date": "2025-01-02",
                "model": "openai/gpt-4o",
                "model_permaslug": "openai/gpt-4o-2024-08-06",
                "endpoint_id": "ep-1",
                "provider_name": "OpenAI",
                "usage": 1.5,
                "byok_usage_inference": 0,
                "requests": 30,
                "prompt_tokens": 40000,
                "completion_tokens": 10000,
                "reasoning_tokens": 0,
            },
            {
                "date": "2025-01-03",
                "model": "meta-llama/llama-3.1-70b-instruct",
                "model_permaslug": "meta-llama/llama-3.1-70b-instruct",
                "endpoint_id": "ep-2",
                "provider_name": "DeepInfra",
                "usage": 0.25,
                "byok_usage_inference": 0,
                "requests": 10,
                "prompt_tokens": 5000,
                "completion_tokens": 1000,
                "reasoning_tokens": 0,
            },
        ]
    }
