#!/bin/sh
# A deliberately broken locktest client: answers the handshake, then never
# answers a request.
read hello
echo '{"type":"ready","version":1,"pid":'$$'}'
exec sleep 60
