# corral's container image, built without pulling anything: `make image`
# builds the static binary (CGO_ENABLED=0) and puts it, CA certificates and a
# passwd/group naming a non-root user into bin/image/, the build context of
# this file. For a build from source with a Go builder image, see
# deploy/image/Dockerfile.multistage.
#
#   make image                      # buildah (or podman) build -> localhost/corral:dev
#   podman run --rm -p 8080:8080 localhost/corral:dev serve --insecure-dev
#
# Probes: GET /healthz (liveness) and GET /readyz (readiness) on the listen
# port; the image has no shell, so probe over HTTP (Kubernetes httpGet, a load
# balancer's health check), not with a command.
FROM scratch

COPY passwd group /etc/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY corral /corral

# 65532: the conventional "nonroot" uid/gid of distroless images.
USER 65532:65532

# Inside a container listen on every interface; --addr (or this variable)
# still wins. JSON logs for log collectors.
ENV CORRAL_ADDR=0.0.0.0:8080 \
    CORRAL_LOG_FORMAT=json
EXPOSE 8080

# SIGTERM drains: /readyz turns 503, new upgrades get 503, every client is
# told (close 4000, GOING_AWAY) to resume after a delay spread over
# drain-window, then the process exits. Give the runtime at least
# drain-window plus a few seconds before it kills (docker stop -t,
# terminationGracePeriodSeconds) and keep shutdown-timeout above it.
STOPSIGNAL SIGTERM

ENTRYPOINT ["/corral"]
CMD ["serve"]
