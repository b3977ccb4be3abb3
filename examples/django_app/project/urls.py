"""One view: the last runs of the heartbeat job, and which process answered."""

import os

from django.http import HttpRequest, JsonResponse
from django.urls import path

from project.jobs import app


def index(request: HttpRequest) -> JsonResponse:
    beats = [
        {"at": o.scheduled_for.isoformat(), "by": o.worker, "status": o.status}
        for o in app.history("heartbeat", limit=5)
    ]
    return JsonResponse({"pid": os.getpid(), "beats": beats})


urlpatterns = [path("", index)]
