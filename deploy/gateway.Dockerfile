# The compose gateway: nginx with openssl, to make a self-signed certificate on first start.
FROM nginx:1.27-alpine
RUN apk add --no-cache openssl
COPY deploy/nginx.conf /etc/nginx/conf.d/default.conf
COPY deploy/gateway-cert.sh /docker-entrypoint.d/40-self-signed-cert.sh
RUN chmod +x /docker-entrypoint.d/40-self-signed-cert.sh
EXPOSE 80 443
