"""Staff set limits and prices here; the ledger and GPU samples are read-only records."""

from __future__ import annotations

from django.contrib import admin

from clusters.web.api.pagination import BoundedPaginator
from common.numbers import with_unit
from governance.models import GpuPrice, GpuSample, LedgerSpool, Limit, RequestRecord, SetAsideRecord, TokenPrice


@admin.register(Limit)
class LimitAdmin(admin.ModelAdmin):
    list_display = ["__str__", "requests_per_minute", "tokens_per_minute", "monthly_tokens",
                    "api_token_requests_per_minute", "api_token_tokens_per_minute", "updated_at"]
    list_select_related = ["team"]
    search_fields = ["team__name", "model"]
    autocomplete_fields = ["team"]


@admin.register(GpuPrice)
class GpuPriceAdmin(admin.ModelAdmin):
    list_display = ["gpu_product", "price_per_gpu_hour"]


@admin.register(TokenPrice)
class TokenPriceAdmin(admin.ModelAdmin):
    list_display = ["model", "price_per_million_tokens"]
    search_fields = ["model"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by the gateway and the sampler: looked at, never edited. Millions of them (a
    day of requests at 12 a second): a page counts them up to a bound, then says "about" (issue 41:
    Django's paginator and its full result count read every row twice on each page load), and
    reads its ids before its rows (``BoundedPaginator``)."""

    paginator = BoundedPaginator
    show_full_result_count = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(RequestRecord)
class RequestRecordAdmin(ReadOnlyAdmin):
    list_display = ["started_at", "team", "username", "token_name", "model", "status", "latency",
                    "first_byte", "prompt_tokens", "completion_tokens"]
    list_filter = ["status", "stream"]
    search_fields = ["team", "username", "model"]
    date_hierarchy = "started_at"

    @admin.display(description="Latency", ordering="latency_ms")
    def latency(self, record: RequestRecord) -> str:
        """The timer's float to a tenth of a millisecond, with its unit (raw, it showed 15 digits)."""
        return with_unit(record.latency_ms, "ms")

    @admin.display(description="First byte", ordering="first_byte_ms")
    def first_byte(self, record: RequestRecord) -> str:
        """As :meth:`latency`; a dash when no answer byte was sent."""
        return with_unit(record.first_byte_ms, "ms")


@admin.register(GpuSample)
class GpuSampleAdmin(ReadOnlyAdmin):
    list_display = ["sampled_at", "team", "model", "node_pool", "gpu_product", "gpus", "period_seconds", "idle"]
    list_filter = ["idle"]
    search_fields = ["team", "model", "node_pool"]
    date_hierarchy = "sampled_at"


@admin.register(SetAsideRecord)
class SetAsideRecordAdmin(ReadOnlyAdmin):
    """Request records the database refused even alone (governance.ledger): what they held and why."""

    list_display = ["set_aside_at", "error", "values"]
    search_fields = ["values", "error"]
    date_hierarchy = "set_aside_at"


@admin.register(LedgerSpool)
class LedgerSpoolAdmin(ReadOnlyAdmin):
    """How far each gateway process's spool is written (a row left behind: a process that died and
    whose spool no gateway has replayed yet, or was replayed before its mark was dropped)."""

    list_display = ["name", "written_bytes", "updated_at"]
