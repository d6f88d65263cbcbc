#!/bin/sh
# A deliberately broken locktest client: answers the handshake, then prints
# garbage instead of a reply.
read hello
echo '{"type":"ready","version":1,"pid":'$$'}'
read req
echo "Traceback (most recent call last): oops"
sleep 30
