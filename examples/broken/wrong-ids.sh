#!/bin/sh
# A deliberately broken locktest client: answers every request with the
# wrong id and without an owner.
read hello
echo '{"type":"ready","version":1,"pid":'$$'}'
while read req; do
  echo '{"id":999,"outcome":"ok"}'
done
