# The image web, worker and beat run (docker-compose.yml). Build: docker build -t costsite .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # The checkout in /app comes before the installed copy, so templates and static files are
    # found beside the code whichever process (gunicorn, celery, manage.py) imports it.
    PYTHONPATH=/app \
    DJANGO_DEBUG=false \
    DJANGO_STATIC_ROOT=/app/staticfiles \
    COSTSITE_DATA_DIR=/data

RUN groupadd --system --gid 10001 costsite \
    && useradd --system --uid 10001 --gid costsite --home-dir /app --shell /usr/sbin/nologin costsite

WORKDIR /app
COPY . .
RUN pip install . \
    # Debug is off here, so settings need a real key: a throwaway one, for collectstatic only.
    && DJANGO_SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
       python manage.py collectstatic --no-input -v 0 \
    && mkdir -p /data \
    && chown -R costsite:costsite /data /app/staticfiles

USER costsite
EXPOSE 8000
CMD ["gunicorn", "costsite.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
